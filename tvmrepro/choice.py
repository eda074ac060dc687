"""Which releases an answer is over, and why: the default set, the ones named, or every served
one; and the releases of its device that it did not probe.

The default is one set for every command, the service and the page: the newest final release
of each minor version (`Catalog.spanning`), CPU. Provisioning more changes no default: a worker
serves the extras only when told (`--also-provisioned`). An answer over fewer releases than its
device has names those it never probed, so that "never reproduced" is read as "on these".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from tvmrepro.environments import Catalog, Environment, default_catalog
from tvmrepro.errors import NotServed
from tvmrepro.escaping import code_span

DEFAULT_DEVICE = "cpu"
DEFAULT_WHY = "the default: the newest release of each minor version"
SERVED_WHY = "every environment a live worker serves ('all')"
NAMED_WHY = "named by the request"
FLAG_WHY = "named by --env"


@dataclass(frozen=True)
class Choice:
    """The environments an answer is over, in catalog order, and why those."""

    environments: list[Environment]
    why: str

    @property
    def ids(self) -> list[str]:
        """Their ids."""
        return [env.id for env in self.environments]


def default_environments(catalog: Catalog, device: str = DEFAULT_DEVICE) -> list[Environment]:
    """The default set: the newest final release of each minor version of `device`."""
    return catalog.spanning(device)


def default_choice(catalog: Catalog, served: Collection[str] | None = None) -> Choice:
    """The default set; given `served` (the environments live workers serve), those of it that
    are served, the others named in `why` (NotServed when none is)."""
    default = default_environments(catalog)
    if served is None:
        return Choice(default, DEFAULT_WHY)
    chosen = [env for env in default if env.id in served]
    left = [env.id for env in default if env.id not in served]
    if not chosen:
        raise NotServed(left, "environments")
    return Choice(chosen, DEFAULT_WHY + (f" (no live worker serves {', '.join(left)}: left out)"
                                         if left else ""))


def not_probed(catalog: Catalog, used: Iterable[str]) -> list[str]:
    """The releases of the devices of `used` that it leaves out, in catalog order (none when it
    has them all)."""
    taken = set(used)
    devices = {env.device for env in catalog.environments if env.id in taken}
    return [env.id for env in catalog.environments
            if env.device in devices and env.id not in taken]


def over_fields(used: list[str], why: str | None,
                catalog: Catalog | None = None) -> dict[str, Any]:
    """An answer's `environments_why` and `not_probed` (its view's, its JSON's)."""
    return {"environments_why": why, "not_probed": not_probed(catalog or default_catalog(), used)}


def over_text(used: list[str], why: str | None, left: list[str]) -> str:
    """'on A, B (why); not probed: X, Y': what an answer is over (`left`: its `not_probed`)."""
    text = f"on {', '.join(used) or 'no environment'}" + (f" ({why})" if why else "")
    return text + (f"; not probed: {', '.join(left)}" if left else "")


def over_line(used: list[str], why: str | None, catalog: Catalog | None = None) -> str:
    """`over_text`, the releases left out read from the catalog."""
    return over_text(used, why, not_probed(catalog or default_catalog(), used))


def over_markdown(used: list[str], why: str | None, left: list[str]) -> str:
    """The Markdown sentence of a report that says what it is over, and what it leaves out
    (`left`, its `not_probed`)."""
    text = f"On {', '.join(code_span(e) for e in used) or 'no environment'}"
    text += f" ({why})" if why else ""
    if left:
        text += "; not probed: " + ", ".join(code_span(e) for e in left)
    return text + "."
