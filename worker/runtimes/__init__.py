"""Where a run happens: a sandboxed local process, or a fresh container (docker.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tvmrepro.errors import BadInput

if TYPE_CHECKING:
    from tvmrepro.settings import Settings
    from worker.runtimes.base import Runtime


def make_runtime(name: str, settings: Settings) -> Runtime:
    """The runtime called `name` ("local" or "docker")."""
    if name == "local":
        from worker.runtimes.local import LocalRuntime

        return LocalRuntime(settings)
    if name == "docker":
        from worker.runtimes.docker import DockerRuntime

        return DockerRuntime(settings)
    raise BadInput("runtime", f"unknown runtime {name!r}; known: local, docker")
