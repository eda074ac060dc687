"""Script cases run in the Docker runtime's containers."""

from __future__ import annotations

from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from worker.runner import run_variant
from worker.runtimes.docker import DockerRuntime


def run_script(runtime: DockerRuntime, env: Environment, script: str, run_id: str | None = None,
               **limits: int) -> Result:
    """Run a script-mode case in a container."""
    return run_variant(parse_case({"script": script, **limits}), "script", env, runtime,
                       run_id=run_id)
