"""What the store holds of jobs and runs, as typed rows (pydantic models) instead of dicts.

The store writes and reads these; the service turns them into the API's views
(tvmrepro.api.views). A column added to a table is a field added here, with a default
so that rows of older code still validate.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tvmrepro.api.traced import SymbolTrace
from tvmrepro.api.views import Comparison
from tvmrepro.lifecycle import RunState


class RunRow(BaseModel):
    """One (variant, environment) of a job; `result` is its result's summary once done."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    id: str
    job_id: str
    ordinal: int
    variant: str
    environment: str
    state: RunState
    cache_key: str
    cached: bool = False
    result_id: str | None = None  # itself, or the run the cache served it from
    timeout_s: int
    deliveries: int = 0
    claimed_by: str | None = None
    claimed_at: float | None = None
    published_at: float | None = None
    created_at: float
    finished_at: float | None = None
    result: dict[str, Any] | None = None  # read with the run; never written with it

    @property
    def done(self) -> bool:
        """Whether the run has its result."""
        return self.state == RunState.DONE

    @property
    def status(self) -> str | None:
        """Its result's status (None until done)."""
        return (self.result or {}).get("status")

    def columns(self) -> dict[str, Any]:
        """The row as the runs table stores it."""
        return self.model_dump(mode="json", exclude={"result"})


class JobRow(BaseModel):
    """One submission and its runs in order; `comparisons` once its last run is stored."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    id: str
    kind: str
    title: str = ""
    case: dict[str, Any]
    environments: list[str]
    variants: list[str]
    bypass_cache: bool = False
    created_at: float
    # Why those environments (tvmrepro.choice: the default set, named, every served one); None:
    # stored before it was kept, or a kind that names its own.
    environments_why: str | None = None
    # Who submitted it (tvmrepro.submitters), and what its submission stored (bytes); set by
    # the store as it admits the job (Store.admitting).
    submitter: str | None = None
    stored_bytes: int | None = None
    runs: list[RunRow] = []
    comparisons: list[Comparison] | None = None  # None: not computed for these runs yet
    # The symbol traces, made with the comparisons (None: not made, or stored by an older
    # version that kept only comparisons).
    symbols: list[SymbolTrace] | None = None

    @property
    def finished(self) -> bool:
        """Every run of the job has its result."""
        return all(run.done for run in self.runs)

    def columns(self) -> dict[str, Any]:
        """The row as the jobs table stores it."""
        return self.model_dump(mode="json", exclude={"runs", "comparisons", "symbols"})
