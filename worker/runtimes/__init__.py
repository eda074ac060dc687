"""Where a run happens: a sandboxed local process, or a fresh container (docker.py).

`fake` (fake.py) runs nothing and reports scripted outcomes: for tests only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tvmrepro.errors import BadInput

if TYPE_CHECKING:
    from tvmrepro.settings import Settings
    from worker.runtimes.base import Runtime


def make_runtime(name: str, settings: Settings) -> Runtime:
    """The runtime called `name` ("local", "docker", or "fake" for tests)."""
    if name == "local":
        from worker.runtimes.local import LocalRuntime

        return LocalRuntime(settings)
    if name == "docker":
        from worker.runtimes.docker import DockerRuntime

        return DockerRuntime(settings)
    if name == "fake":
        from worker.runtimes.fake import FakeRuntime

        return FakeRuntime(settings)
    raise BadInput("runtime", f"unknown runtime {name!r}; known: local, docker, fake")
