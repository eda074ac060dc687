"""Warm sandboxes and the supervisor, with real TVM: single use, replacement, limits, forged results.

A warm sandbox is a supervisor with TVM imported, waiting for one case: forked
by its environment's zygote (which imported TVM once), or, where forking does
not work, started on its own. These tests take one from a pool, check what the
run saw, and what the next run sees.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator

import psutil
import pytest

from tests.conftest import NEW_ENV
from tests.fixtures.hostile_scripts import FORGE
from tests.worker.sandboxes import needs_bubblewrap, run_warm, wait_warm
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.base import Limits
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def warm(tvm_envs: dict[str, Environment], settings: Settings) -> Iterator[LocalRuntime]:
    """A local runtime keeping one sandbox of NEW_ENV warm."""
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    runtime.prewarm([tvm_envs[NEW_ENV]])
    yield runtime
    runtime.close()


def waiting_sandbox(runtime: LocalRuntime, env: Environment):  # type: ignore[no-untyped-def]
    """The sandbox that waits for env now."""
    assert runtime.warm.pool is not None
    wait_warm(runtime, env)
    return runtime.warm.pool.waiting[(env.id, Limits.pooled(runtime.settings))][0][1]


def test_each_sandbox_runs_one_case_and_is_replaced(warm: LocalRuntime,
                                                    tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    first = waiting_sandbox(warm, env)
    one = run_warm(warm, env, "import os\nprint(os.getppid())\n")
    assert one.status == "ok", one.log.stderr[-2000:]
    assert first.proc.poll() is not None  # used once, then ended
    second = waiting_sandbox(warm, env)
    assert second is not first and second.proc is not first.proc
    two = run_warm(warm, env, "print('again')\n")
    assert two.status == "ok" and two.log.stdout == "again\n"
    assert two.isolation["uid"] != one.isolation["uid"]
    assert one.tvm is not None and one.tvm["version"] == "0.27.0.post1"


def host_pid(sandbox) -> int:  # type: ignore[no-untyped-def]
    """The host's pid of a forked sandbox (what its pidfd refers to)."""
    with open(f"/proc/self/fdinfo/{sandbox.proc.pidfd}") as info:
        return next(int(line.split()[1]) for line in info if line.startswith("Pid:"))


def test_sandboxes_are_forked_by_one_zygote_that_imported_tvm_once(
        warm: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    look = "import os\nprint(os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    results, zygotes = [], []
    for _ in range(2):
        sandbox = waiting_sandbox(warm, env)
        zygotes.append(warm.zygotes.running[env.id])
        ancestors = [p.pid for p in psutil.Process(host_pid(sandbox)).parents()]
        assert zygotes[-1].proc.pid in ancestors  # forked by the zygote, not started anew
        results.append(run_warm(warm, env, look))
    one, two = results
    assert (one.status, two.status) == ("ok", "ok"), one.log.stderr[-2000:]
    assert zygotes[0] is zygotes[1] and zygotes[0].alive()  # TVM imported once for both
    # Each run sees only its own PID namespace: its init (1), its supervisor (2) and itself.
    assert one.log.stdout == two.log.stdout == "3 [1, 2, 3]\n"
    assert one.isolation["uid"] != two.isolation["uid"]


def test_a_zygote_that_died_costs_no_run_and_is_started_again(
        warm: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    doomed = waiting_sandbox(warm, env)
    zygote = warm.zygotes.running[env.id]
    os.killpg(zygote.proc.pid, signal.SIGKILL)
    zygote.proc.wait()
    doomed.proc.wait(timeout=10)  # its sandboxes live in its PID namespace: gone with it
    result = run_variant(parse_case({"script": "print('fine')\n"}), "script", env, warm)
    assert result.status == "ok" and result.log.stdout == "fine\n", result.log.stderr[-2000:]
    again = run_warm(warm, env, "print('forked again')\n")
    assert again.log.stdout == "forked again\n"
    assert warm.zygotes.running[env.id] is not zygote and warm.zygotes.running[env.id].alive()


class LocalRuntimeWithoutNamespaces(LocalRuntime):
    """A runtime on a machine whose kernel refuses the zygote (stands for one: this one allows
    it): its zygote exits at once, as one refused a namespace would."""

    def _zygote_command(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        command, fds = super()._zygote_command(*args, **kwargs)
        return [*command, "--no-such-option"], fds


class LocalRuntimeWhoseForksFail(LocalRuntime):
    """A runtime whose forked sandboxes die before they are ready (stands for a kernel that
    refuses what they do: here, their work directory's mount point does not exist)."""

    fork_workdir = "/mnt/no-such-directory"


@pytest.mark.parametrize("runtime_class", [LocalRuntimeWithoutNamespaces,
                                           LocalRuntimeWhoseForksFail])
def test_where_no_zygote_works_each_sandbox_imports_tvm_itself(
        runtime_class: type[LocalRuntime], tvm_envs: dict[str, Environment],
        settings: Settings) -> None:
    runtime = runtime_class(settings.model_copy(update={"warm_sandboxes": 1}))
    needs_bubblewrap(runtime)
    try:
        runtime.prewarm([tvm_envs[NEW_ENV]])
        result = run_warm(runtime, tvm_envs[NEW_ENV], "print('still warm')\n")
        assert result.status == "ok" and result.log.stdout == "still warm\n"
        assert runtime.zygotes is not None
        assert runtime.zygotes.enabled is False and not runtime.zygotes.running
    finally:
        runtime.close()


def test_a_one_shot_command_whose_forks_fail_runs_cold(tvm_envs: dict[str, Environment],
                                                       settings: Settings) -> None:
    """A command's zygote (start_zygotes, no pool) whose forked sandboxes die before they are
    ready: the run starts a sandbox that imports TVM itself, and forking is given up."""
    runtime = LocalRuntimeWhoseForksFail(settings.model_copy(update={"warm_sandboxes": 0}))
    needs_bubblewrap(runtime)
    try:
        runtime.start_zygotes([tvm_envs[NEW_ENV]])
        result = run_variant(parse_case({"script": "print('cold')\n"}), "script",
                             tvm_envs[NEW_ENV], runtime)
        assert result.status == "ok" and result.log.stdout == "cold\n", result.message
        assert result.isolation["warm"] is False
        assert runtime.zygotes is not None and runtime.zygotes.enabled is False
    finally:
        runtime.close()


def test_zygotes_started_for_a_command_do_not_outlive_a_start_that_fails(
        tvm_envs: dict[str, Environment], settings: Settings) -> None:
    """The second environment of a command is not provisioned: the first one's zygote, already
    started, is stopped too (it held its build and a run directory) and the error is the
    caller's to say."""
    from tvmrepro.errors import ProvisionError

    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    needs_bubblewrap(runtime)
    never = default_catalog().get("tvm-0.25.0rc0-cuda")  # CUDA: never provisioned by the tests
    ours = f"sandbox-{os.getpid()}-*"  # run directories of this process's runtimes
    before = set(settings.work_dir.glob(ours))
    def zygotes() -> set[int]:  # of every runtime of this process (other tests' too)
        return {c.pid for c in psutil.Process().children(recursive=True)
                if "--zygote" in c.cmdline()}

    others = zygotes()
    try:
        with pytest.raises(ProvisionError):
            runtime.start_zygotes([tvm_envs[NEW_ENV], never])
        assert zygotes() - others == set()
        # Only new directories count: other runtimes' warm pools retire theirs meanwhile.
        assert set(settings.work_dir.glob(ours)) - before == set()
        assert runtime.zygotes is not None and not runtime.zygotes.running
    finally:
        runtime.close()


def test_a_sandbox_that_died_while_waiting_costs_no_run(warm: LocalRuntime,
                                                        tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    doomed = waiting_sandbox(warm, env)
    doomed.proc.kill_tree()
    doomed.proc.wait()
    result = run_variant(parse_case({"script": "print('fine')\n"}), "script", env, warm)
    assert result.status == "ok" and result.log.stdout == "fine\n", result.log.stderr[-2000:]
    assert waiting_sandbox(warm, env) is not doomed


def test_what_a_run_leaves_is_not_seen_by_the_next(warm: LocalRuntime,
                                                   tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    leave = ("import os, subprocess\n"
             "open('/tmp/left-behind', 'w').write('x')\n"
             "open('left-behind', 'w').write('x')\n"
             "subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
             "print(os.listdir('.'))\n")
    first = run_warm(warm, env, leave)
    assert first.status == "ok", first.log.stderr[-2000:]
    assert "left-behind" in first.log.stdout
    look = ("import os\n"
            "names = [open(f'/proc/{p}/cmdline').read() for p in os.listdir('/proc') if p.isdigit()]\n"
            "print(os.path.exists('/tmp/left-behind'), os.path.exists('left-behind'),"
            " any('sleep' in n for n in names))\n")
    second = run_warm(warm, env, look)
    assert second.status == "ok", second.log.stderr[-2000:]
    assert second.log.stdout == "False False False\n"


def test_a_case_starts_with_the_warm_up_done_and_its_objects_frozen(
        warm: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    """What the supervisor did before the case came is inherited, not redone: TVM is imported,
    inspect's module map is made, and the imports' objects are out of the collector's way."""
    look = ("import gc, inspect, os, sys\n"
            "print('tvm' in sys.modules, len(inspect._filesbymodname) > 500,"
            " gc.get_freeze_count() > 10000 and gc.isenabled(),"
            " os.path.exists(sys.modules['harness.supervisor'].__cached__))\n")
    result = run_warm(warm, tvm_envs[NEW_ENV], look)
    assert result.status == "ok", result.log.stderr[-2000:]
    # The last: the harness was loaded from bytecode compiled outside (its mount is read-only).
    assert result.log.stdout == "True True True True\n"


def test_the_time_limit_counts_from_the_hand_over(warm: LocalRuntime,
                                                  tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    waiting_sandbox(warm, env)
    time.sleep(7)  # the sandbox waits longer than the case's whole time limit
    result = run_warm(warm, env, "import time\ntime.sleep(1)\nprint('done')\n", timeout_s=6)
    assert result.status == "ok", (result.message, result.log.stderr[-2000:])
    slow = run_warm(warm, env, "import time\ntime.sleep(60)\n", timeout_s=3)
    assert slow.status == "timeout"


def test_the_case_limits_bind_in_a_warm_sandbox(warm: LocalRuntime,
                                                tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    alloc = "import numpy as np\nx = np.ones(1536 * 2**20, dtype=np.uint8)\nprint(x.sum())\n"
    small = run_warm(warm, env, alloc, memory_mb=1024)
    # Refused at once (nothing allocated, so no `oom`): the case's 1024 MB bound, not the 4096
    # the sandbox started with.
    assert (small.status, small.error_type) == ("error", "MemoryError"), (
        small.message, small.log.stderr[-2000:])
    assert small.isolation["memory_mb"] == 1024


def test_the_work_directory_has_a_size_and_an_inode_cap(warm: LocalRuntime,
                                                        tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    # Files of 256 MB each (one file is capped at 512 MB by RLIMIT_FSIZE): 4 GB asked for.
    fill = ("import errno\nchunk = b'x' * (1 << 20)\nn = 0\n"
            "try:\n    for n in range(4096):\n"
            "        with open(f'big{n // 256}', 'ab') as f:\n            f.write(chunk)\n"
            "except OSError as e:\n    print('full', errno.errorcode[e.errno], n)\n")
    big = run_warm(warm, env, fill, memory_mb=4096)
    assert big.status == "ok", big.log.stderr[-2000:]
    assert big.log.stdout.startswith("full ENOSPC"), big.log.stdout
    assert int(big.log.stdout.split()[2]) <= 1024
    files = ("import errno\nn = 0\ntry:\n    for n in range(200000):\n"
             "        open(f'f{n}', 'w').close()\n"
             "except OSError as e:\n    print('full', errno.errorcode[e.errno], n)\n")
    many = run_warm(warm, env, files)
    assert many.log.stdout.startswith("full ENOSPC"), (many.log.stdout, many.log.stderr[-500:])
    assert int(many.log.stdout.split()[2]) < 70000


@pytest.mark.parametrize(("ending", "status", "error_type"), [
    ("os.abort()\n", "crash", "SIGABRT"),
    ("raise SystemExit(3)\n", "error", None),
    ("os.kill(os.getppid(), 9)\nimport time\ntime.sleep(30)\n", "crash", "SIGKILL"),
])
def test_a_forged_result_is_not_believed(ending: str, status: str, error_type: str | None,
                                         warm: LocalRuntime,
                                         tvm_envs: dict[str, Environment]) -> None:
    result = run_warm(warm, tvm_envs[NEW_ENV], FORGE + ending, timeout_s=20)
    assert result.status == status, (result.message, result.log.stderr[-2000:])
    if error_type:
        assert result.error_type == error_type
    assert result.outputs is None
    assert result.tvm is not None and result.tvm["version"] == "0.27.0.post1"


def test_a_self_inflicted_sigkill_is_a_crash(warm: LocalRuntime,
                                             tvm_envs: dict[str, Environment]) -> None:
    result = run_warm(warm, tvm_envs[NEW_ENV], "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert (result.status, result.signal) == ("crash", "SIGKILL"), result.message


def test_nul_bytes_and_lone_surrogates_come_back_as_text(warm: LocalRuntime,
                                                         tvm_envs: dict[str, Environment]) -> None:
    script = ("import sys\nsys.stdout.buffer.write(b'a\\x00b\\xff\\n')\n"
              "raise ValueError('bad \\x00 \\ud800')\n")
    result = run_warm(warm, tvm_envs[NEW_ENV], script)
    assert result.status == "error"
    assert "\x00" not in result.log.stdout and "a\\x00b" in result.log.stdout
    assert result.message is not None and "\x00" not in result.message
    result.message.encode()  # no lone surrogate left


def test_the_directory_of_a_sandbox_whose_worker_died_is_swept(settings: Settings) -> None:
    gone = settings.work_dir / f"sandbox-{2 ** 22 + 7}-{'0' * 32}"  # above pid_max: never alive
    (gone / "work").mkdir(parents=True)
    mine = settings.work_dir / f"sandbox-{os.getpid()}-{'1' * 32}"
    mine.mkdir(parents=True)
    try:
        LocalRuntime(settings)  # a runtime sweeps when it starts
        assert not gone.exists() and mine.exists()
    finally:
        mine.rmdir()


def test_a_killed_workers_directories_are_swept_even_as_zombies_and_at_close(
        settings: Settings) -> None:
    child = subprocess.Popen(["true"])  # exits, and stays a zombie: nobody waits for it yet
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.05)
    zombie = settings.work_dir / f"sandbox-{child.pid}-{'2' * 32}"
    (zombie / "work").mkdir(parents=True)
    runtime = LocalRuntime(settings)  # what a worker process does when it starts
    assert not zombie.exists()
    child.wait()
    later = settings.work_dir / f"sandbox-{2 ** 22 + 9}-{'3' * 32}"  # left after that start
    (later / "work").mkdir(parents=True)
    runtime.close()  # a worker's clean stop
    assert not later.exists()
