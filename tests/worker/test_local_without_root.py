"""The local runtime when its worker is not root: rlimits alone, on the host's network.

Bubblewrap and `unshare` need root here, so a worker of another user runs the
case under rlimits only and says so in each result's `isolation` (README,
"Resource limits"). The choice is made as a real unprivileged user; the run under
that choice uses the root-owned test home's TVM, with the same two tools absent.
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
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

NOBODY = 65534


def _choose_as_nobody(home: str, answer: Any) -> None:
    """In a forked child: become the unprivileged user, then let the runtime choose."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    runtime = LocalRuntime(Settings.from_env({"TVMREPRO_HOME": home}))
    answer.send((os.geteuid(), runtime.bwrap, runtime.unshare, runtime.isolation()))


@pytest.fixture
def nobody_home() -> Iterator[Path]:
    """A TVMREPRO_HOME the unprivileged user owns (pytest's tmp_path is root's alone)."""
    if os.geteuid() != 0:
        pytest.skip("switching to an unprivileged user needs root")
    home = Path(tempfile.mkdtemp(prefix="tvmrepro-nobody-"))
    os.chown(home, NOBODY, NOBODY)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_not_as_root_the_runtime_chooses_rlimits_on_the_host_network(nobody_home: Path) -> None:
    assert shutil.which("bwrap") and shutil.which("unshare")  # present: only the user decides
    # The interpreter lives under root's home, out of reach of another user: fork, then
    # drop privileges in the child, with the runtime's code already loaded.
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_choose_as_nobody, args=(str(nobody_home), send))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and receive.poll(), "the unprivileged child gave no answer"
    euid, bwrap, unshare, isolation = receive.recv()
    assert euid == NOBODY
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
