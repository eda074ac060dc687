"""Script cases run in the local runtime's sandboxes, warm (from its pool) or cold."""

from __future__ import annotations

import os
import subprocess
import time

from tests.fixtures.ci import cannot_run
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from worker.runner import run_variant
from worker.runtimes.base import Limits
from worker.runtimes.local import LocalRuntime

WARM_WAIT_S = 300  # a loaded machine's first sandbox imports TVM: minutes, not seconds


def wait_warm(runtime: LocalRuntime, env: Environment) -> None:
    """Until a sandbox waits for env (the pool starts them in the background)."""
    assert runtime.warm.pool is not None
    key = (env.id, Limits.pooled(runtime.settings))
    deadline = time.monotonic() + WARM_WAIT_S
    while runtime.warm.pool.count(key) < 1:
        assert time.monotonic() < deadline, "no warm sandbox came up"
        time.sleep(0.1)


def run_warm(runtime: LocalRuntime, env: Environment, script: str, **limits: int) -> Result:
    """Run a script case in a warm sandbox (waiting for one first) and check it was warm."""
    wait_warm(runtime, env)
    result = run_variant(parse_case({"script": script, **limits}), "script", env, runtime)
    assert result.isolation["warm"] is True
    return result


def run_script(runtime: LocalRuntime, env: Environment, script: str, **limits: int) -> Result:
    """Run a script case: in a warm sandbox where the runtime keeps them (waiting for one),
    else in one started for it."""
    if runtime.warm.pool is not None:
        wait_warm(runtime, env)
    return run_variant(parse_case({"script": script, **limits}), "script", env, runtime)


def processes_of(uid: int) -> list[str]:
    """Processes still running as a run's sandbox uid (there should be none after the run)."""
    out = subprocess.run(["ps", "-eo", "uid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split(None, 1)[0] == str(uid)]


def needs_bubblewrap(runtime: LocalRuntime) -> None:
    """Skip a test of the bubblewrap sandbox where the runtime has none (under CI: fail it)."""
    if runtime.bwrap is None:
        cannot_run("bubblewrap needs root here: run the tests as root" if os.geteuid() != 0
                   else "bubblewrap is not installed (scripts/bootstrap installs it)")
