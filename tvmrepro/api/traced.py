"""A symbol trace as answers show it: what each pass did to a function an error names, in one
run (the trace itself is made by symbols.py). Wire models only, so that the store and the
API's models may import them without the tracing coming along.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field


class SymbolEvent(BaseModel):
    """What one pass did to the traced function."""

    step: int = Field(description="the pass's position in the variant, from 1 (kept for "
                                  "readers of stored traces; `index` is what users see)")
    pass_name: str
    event: Literal["appeared", "renamed", "kind_changed", "removed"]
    name: str = Field(description="the function's name after the pass (before it, if removed)")
    kind: str | None = None
    previous: str | None = Field(default=None, description="old name, or old kind")

    @computed_field(  # type: ignore[prop-decorator]  # pydantic's own way
        description="the pass's index in the variant, from 0, as in the stage pass:<index>:<Name>")
    @property
    def index(self) -> int:
        """The pass's index from 0 (what every answer shows)."""
        return self.step - 1


class SymbolTrace(BaseModel):
    """One symbol's story in one run (a variant in an environment)."""

    symbol: str
    variant: str
    environment: str
    events: list[SymbolEvent]
    final_name: str | None = Field(description="its name after the last pass (None: gone)")

    def summary(self) -> str:
        """One line for people, e.g. 'appears after LambdaLift (pass 1) as Function; renamed
        ... (pass 2)' (passes from 0, as in stages)."""
        if not self.events:
            return "in the module from the start, unchanged" if self.final_name else \
                "never in the module"
        story = "; ".join(describe(event) for event in self.events)
        return story if self.events[0].event == "appeared" else \
            f"in the module from the start; {story}"


def describe(event: SymbolEvent) -> str:
    where = f"{event.pass_name} (pass {event.index})"
    if event.event == "appeared":
        return f"appears after {where} as {event.kind}"
    if event.event == "renamed":
        return f"renamed to {event.name} by {where}"
    if event.event == "kind_changed":
        return f"becomes a {event.kind} (was {event.previous}) in {where}"
    return f"removed by {where}"
