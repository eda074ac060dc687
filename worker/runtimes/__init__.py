"""Where a run happens: a sandboxed local process (local.py), or a fresh container (docker.py).

RUNTIMES is the one table of runtimes a worker may be given (TVMREPRO_RUNTIME). The
product has no runtime that runs nothing: the tests' fake one (tests/fakes/runtime.py) is
added to this table only by the tests' own launcher (tests/fakes/cli.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tvmrepro.errors import BadInput

if TYPE_CHECKING:
    from tvmrepro.settings import Settings
    from worker.runtimes.base import Runtime


def _local(settings: Settings) -> Runtime:
    from worker.runtimes.local import LocalRuntime

    return LocalRuntime(settings)


def _docker(settings: Settings) -> Runtime:
    from worker.runtimes.docker import DockerRuntime

    return DockerRuntime(settings)


# Each imported when made: a process loads only the runtime it uses (and its dependencies).
RUNTIMES: dict[str, Callable[[Settings], Runtime]] = {"local": _local, "docker": _docker}


def make_runtime(name: str, settings: Settings) -> Runtime:
    """The runtime called `name` (a key of RUNTIMES); BadInput names TVMREPRO_RUNTIME if unknown."""
    try:
        make = RUNTIMES[name]
    except KeyError:
        raise BadInput("TVMREPRO_RUNTIME",
                       f"unknown runtime {name!r}; known: {', '.join(RUNTIMES)}") from None
    return make(settings)
