"""One run cannot take what is another's (real TVM, warm forked sandboxes and a cold bubblewrap
one): the run's own cgroup bounds its memory over all its processes and tmpfs pages, gives it one
CPU share whatever it forks, and holds every process it starts; io_uring is refused; ptys and
tmpfs inodes are capped per run."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tests.conftest import NEW_ENV
from tests.fixtures.hostile_scripts import GREEDY, IO_URING, PTYS
from tests.worker.sandboxes import needs_bubblewrap, run_script
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runtimes.cgroup import CPU_SHARES, CPU_WEIGHT, Cgroups
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm


# Sixteen busy children, each in a session of its own, and the run's own view of its cgroup.
FORK_BUSY = """
import os, time
for _ in range(16):
    if os.fork() == 0:
        os.setsid()
        while True:
            pass
time.sleep(1)
print('forked')
time.sleep(60)
"""


INODES = """
import os
n = 0
try:
    while True:
        open(f'/dev/shm/f{n}', 'w').close()
        n += 1
except OSError as exc:
    print(n, exc.errno)
"""


@pytest.fixture(params=["warm", "cold"])
def runtime(request: pytest.FixtureRequest, warm_runtime: LocalRuntime,
            settings: Settings) -> LocalRuntime:
    """The session's warm runtime (a forked sandbox), and one that starts bubblewrap per run."""
    needs_bubblewrap(warm_runtime)
    if request.param == "warm":
        return warm_runtime
    cold = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    request.addfinalizer(cold.close)
    return cold


def test_a_run_gets_a_cgroup_of_its_own(runtime: LocalRuntime,
                                        tvm_envs: dict[str, Environment]) -> None:
    assert runtime.cgroups.available, runtime.cgroups.reason
    result = run_script(runtime, tvm_envs[NEW_ENV], "print('hi')\n", memory_mb=1536)
    assert result.status == "ok", result.log.stderr[-2000:]
    assert result.isolation["cgroup"]["memory_mb"] == 1536
    assert not list(list(runtime.cgroups.parents.values())[0].glob("run-*"))  # removed after


def test_memory_over_processes_and_tmpfs_is_one_limit(runtime: LocalRuntime,
                                                      tvm_envs: dict[str, Environment]) -> None:
    result = run_script(runtime, tvm_envs[NEW_ENV], GREEDY, memory_mb=1536, timeout_s=60)
    assert result.status == "oom", (result.status, result.message, result.log.stdout,
                                     result.log.stderr[-2000:])


def test_io_uring_is_refused(runtime: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    result = run_script(runtime, tvm_envs[NEW_ENV], IO_URING)
    assert result.status == "ok", result.log.stderr[-2000:]
    code, error = result.log.stdout.split()
    assert code == "-1" and int(error) in (1, 38), result.log.stdout  # EPERM or ENOSYS


def test_ptys_are_capped(runtime: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    from worker.runtimes.base import PTYS_MAX

    result = run_script(runtime, tvm_envs[NEW_ENV], PTYS)
    assert result.status == "ok", result.log.stderr[-2000:]
    opened, error = result.log.stdout.split()
    # ptys work (some opened), up to the run's cap; then the devpts instance says it is full.
    assert 0 < int(opened) <= PTYS_MAX and int(error) == errno.ENOSPC, result.log.stdout


def test_tmpfs_inodes_are_capped(runtime: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    from worker.runtimes.base import TMPFS_INODES

    result = run_script(runtime, tvm_envs[NEW_ENV], INODES, timeout_s=60)
    assert result.status == "ok", result.log.stderr[-2000:]
    made, error = result.log.stdout.split()
    assert int(made) < TMPFS_INODES and int(error) == 28, result.log.stdout  # ENOSPC


def test_forked_busy_children_share_one_cpu_share(warm_runtime: LocalRuntime,
                                                  tvm_envs: dict[str, Environment]) -> None:
    """Every process the run forks, each in its own session, is in the run's cgroup, whose CPU
    share is one run's (bench/cpu_share.py measures a run beside such an attacker)."""
    import threading
    import time

    cgroups = warm_runtime.cgroups
    assert cgroups.available, cgroups.reason
    parent = list(cgroups.parents.values())[0]
    holder: dict[str, Result] = {}
    thread = threading.Thread(target=lambda: holder.update(result=run_script(
        warm_runtime, tvm_envs[NEW_ENV], FORK_BUSY, timeout_s=8)))
    thread.start()
    try:
        procs: list[int] = []
        leaders: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = list(parent.glob("run-*"))
            if runs and (runs[0] / "cgroup.procs").exists():
                procs = [int(p) for p in (runs[0] / "cgroup.procs").read_text().split()]
                # Its init, supervisor and case, and the 16 children that left their session.
                leaders = [p for p in procs if _session(p) == p]
                if len(procs) >= 19 and len(leaders) >= 17:
                    break
            time.sleep(0.2)
        assert len(procs) >= 19 and len(leaders) >= 17, (procs, leaders)
        share = runs[0] / "cpu.weight"
        if cgroups.version == 1:
            cpu_dir = cgroups.parents["cpu"] / runs[0].name
            share = cpu_dir / "cpu.shares"
            assert sorted(procs) == sorted(
                int(p) for p in (cpu_dir / "cgroup.procs").read_text().split())
        assert int(share.read_text()) == (CPU_SHARES if cgroups.version == 1 else CPU_WEIGHT)
    finally:
        thread.join()
    assert holder["result"].status == "timeout"


def _session(pid: int) -> int:
    """The session id of a process (0 once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return 0


def test_no_cgroup_is_said_in_the_isolation(settings: Settings,
                                            tvm_envs: dict[str, Environment]) -> None:
    assert not Cgroups(enabled=False).available
    plain = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0, "run_cgroups": False}))
    try:
        result = run_script(plain, tvm_envs[NEW_ENV], "print('hi')\n")
    finally:
        plain.close()
    assert result.status == "ok", result.log.stderr[-2000:]
    assert result.isolation["cgroup"] is None
    assert result.isolation["cgroup_reason"] == "turned off (TVMREPRO_RUN_CGROUPS=0)"
