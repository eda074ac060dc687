"""The local runtime when its worker is not root: rlimits alone, on the host's network.

Bubblewrap and `unshare` need root here, so a worker of another user runs the
case under rlimits only and says so in each result's `isolation` (README,
"Resource limits"). The choice is made by a real unprivileged user: as root (CI),
a forked child that drops to nobody first; as another user, that user. The runs
under that choice use the test home's TVM, which only its owner may reach (it
lives under root's home in CI): they run as the suite's user, the two tools taken
away as the choice takes them.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV
from tests.fixtures.ci import cannot_run
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

NOBODY = 65534


def _choose_unprivileged(home: str, answer: Any) -> None:
    """In a forked child: become the unprivileged user (from root), then let the runtime choose."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    runtime = LocalRuntime(Settings.from_env({"TVMREPRO_HOME": home}))
    answer.send((os.geteuid(), runtime.bwrap, runtime.unshare, runtime.isolation()))


@pytest.fixture
def unprivileged_home() -> Iterator[Path]:
    """A TVMREPRO_HOME the unprivileged user owns (as root: nobody's; pytest's tmp_path is
    root's alone)."""
    home = Path(tempfile.mkdtemp(prefix="tvmrepro-unprivileged-"))
    if os.geteuid() == 0:
        os.chown(home, NOBODY, NOBODY)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_not_as_root_the_runtime_chooses_rlimits_on_the_host_network(
        unprivileged_home: Path) -> None:
    if not (shutil.which("bwrap") and shutil.which("unshare")):  # present: only the user decides
        cannot_run("bubblewrap or unshare is not installed (scripts/bootstrap installs them)")
    # The interpreter lives under root's home, out of reach of another user: fork, then
    # drop privileges in the child, with the runtime's code already loaded.
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_choose_unprivileged, args=(str(unprivileged_home), send))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and receive.poll(), "the unprivileged child gave no answer"
    euid, bwrap, unshare, isolation = receive.recv()
    assert euid != 0 and euid == (NOBODY if os.geteuid() == 0 else os.geteuid())
    assert (bwrap, unshare) == (None, None)
    assert (isolation["sandbox"], isolation["network"]) == ("rlimits", "host")


def without_root_tools(settings: Settings) -> LocalRuntime:
    """A local runtime as a worker that is not root has it: neither bubblewrap nor unshare."""
    runtime = LocalRuntime(settings)
    runtime.bwrap = runtime.unshare = None
    return runtime


def test_without_root_the_case_reaches_the_host_network(tvm_envs: dict[str, Environment],
                                                        settings: Settings) -> None:
    # What the README warns of: the host's Redis answers the case.
    case = parse_case({"script": "import socket\n"
                                 "socket.create_connection(('127.0.0.1', 6379), 5).close()\n"})
    result = run_variant(case, "script", tvm_envs[NEW_ENV], without_root_tools(settings))
    assert result.isolation["sandbox"] == "rlimits" and result.isolation["network"] == "host"
    assert result.status == "ok", result.log.stderr


def test_without_root_the_memory_limit_still_binds(tvm_envs: dict[str, Environment],
                                                   settings: Settings) -> None:
    # 8 GiB of address space, never touched: the host grants it, the 4 GiB limit does not.
    case = parse_case({"script": "import numpy as np\nx = np.empty(8 * 2**30, dtype=np.uint8)\n"})
    result = run_variant(case, "script", tvm_envs[NEW_ENV], without_root_tools(settings))
    assert result.isolation["sandbox"] == "rlimits"
    # Refused at once, nothing allocated: the case's MemoryError (an `oom` needs evidence).
    assert (result.status, result.error_type) == ("error", "MemoryError"), result.log.stderr
