"""The warm pool's lifecycle with real local sandboxes: idle ones reaped, reserved ones taken once.

(Single use, replacement, a death while waiting and what one run leaves for the next are in
test_warm_sandboxes.py; the hostile scripts against warm sandboxes in test_local_runtime.py.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from tests.conftest import NEW_ENV, OLD_ENV
from tests.worker.sandboxes import WARM_WAIT_S, run_warm, wait_warm
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.errors import RuntimeFault
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.base import Limits
from worker.runtimes.local import LocalRuntime
from worker.runtimes.pool import QUIET_S, WarmPool
from worker.runtimes.warm import (
    ALWAYS_AT_START,
    WARM_AT_START_SHARE,
    WARM_SANDBOX_MIB,
    warm_at_start,
)

pytestmark = pytest.mark.tvm
IDLE_S = 2.0


def test_idle_setting_is_read_from_the_environment(test_home: object) -> None:
    read = Settings.from_env({"TVMREPRO_HOME": str(test_home), "TVMREPRO_WARM_IDLE_S": "7.5",
                              "TVMREPRO_WARM_SANDBOXES": "3"})
    assert (read.warm_idle_s, read.warm_sandboxes) == (7.5, 3)


def test_a_sandbox_idle_past_the_setting_is_stopped_and_removed(
        settings: Settings, tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1,
                                                       "warm_idle_s": IDLE_S}))
    try:
        runtime.prewarm([env])
        wait_warm(runtime, env)
        assert runtime.warm.pool is not None and runtime.zygotes is not None
        key = (env.id, Limits.pooled(runtime.settings))
        deadline = time.monotonic() + WARM_WAIT_S
        (_, sandbox), = runtime.warm.pool.waiting[key]
        zygote = runtime.zygotes.running[env.id]  # the sandbox was forked by it
        assert sandbox.alive() and zygote.alive() and zygote.rundir.exists()
        # The reaper looks every IDLE_S / 4: gone within a few of its rounds past IDLE_S, the
        # sandbox first, then the zygote (idle as long, none of its sandboxes left).
        while runtime.warm.pool.count(key) > 0 or runtime.zygotes.running or zygote.rundir.exists():
            assert time.monotonic() < deadline, "the idle sandbox was never reaped"
            time.sleep(0.1)
        assert not sandbox.alive() and sandbox.discarded
        assert not zygote.alive()  # its hold on the build let go too
        assert runtime.warm.pool.count(key) == 0  # not replaced: nothing asked for one
    finally:
        runtime.close()


def test_reserved_sandboxes_are_taken_once_each_by_runs_with_their_limits(
        settings: Settings, tvm_envs: dict[str, Environment]) -> None:
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    try:
        for env_id in (OLD_ENV, NEW_ENV):  # started together: their imports overlap
            runtime.reserve(tvm_envs[env_id], timeout_s=30, memory_mb=1024)
        case = parse_case({"script": "print('hi')\n", "timeout_s": 30, "memory_mb": 1024})
        other_limits = parse_case({"script": "print('hi')\n", "timeout_s": 31, "memory_mb": 1024})
        reserved = dict(runtime.warm.reserved.waiting)
        assert len(reserved) == 2
        # Another case's limits do not take a sandbox started for these.
        assert run_variant(other_limits, "script", tvm_envs[NEW_ENV], runtime).isolation["warm"] \
            is False
        runs = [run_variant(case, "script", tvm_envs[env_id], runtime)
                for env_id in (OLD_ENV, NEW_ENV, NEW_ENV)]
        assert [r.status.value for r in runs] == ["ok", "ok", "ok"], runs[0].log.stderr[-2000:]
        assert [r.isolation["warm"] for r in runs] == [True, True, False]  # none replaced
        assert [r.tvm["version"] for r in runs if r.tvm] == ["0.25.0", "0.27.0.post1",
                                                            "0.27.0.post1"]
        assert all(not s.alive() for queue in reserved.values() for s in queue)
    finally:
        runtime.close()


def test_reserved_sandboxes_no_run_took_end_with_the_runtime(
        settings: Settings, tvm_envs: dict[str, Environment]) -> None:
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    runtime.reserve(tvm_envs[NEW_ENV], timeout_s=30, memory_mb=1024, count=2)
    (sandboxes,) = runtime.warm.reserved.waiting.values()
    assert len(sandboxes) == 2 and all(s.alive() for s in sandboxes)
    runtime.close()
    assert all(not s.alive() and s.rundir is not None and not s.rundir.exists()
               for s in sandboxes)


def test_a_taken_sandbox_is_replaced_once_its_run_is_over(
        settings: Settings, tvm_envs: dict[str, Environment]) -> None:
    import threading

    env = tvm_envs[NEW_ENV]
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    try:
        runtime.prewarm([env])
        wait_warm(runtime, env)
        assert runtime.warm.pool is not None
        key = (env.id, Limits.pooled(runtime.settings))
        results = []
        runner = threading.Thread(target=lambda: results.append(
            run_warm(runtime, env, "import time\ntime.sleep(3)\nprint('ran')\n")))
        runner.start()
        deadline = time.monotonic() + WARM_WAIT_S
        while runtime.warm.pool.count(key) > 0:  # until the run took it
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # While the case runs, nothing is started beside it (its CPU is its own).
        during = (runtime.warm.pool.count(key), runtime.warm.pool.starting.get(key, 0), runner.is_alive())
        runner.join()
        assert results and results[0].log.stdout == "ran\n", results
        assert during == (0, 0, True)
        wait_warm(runtime, env)  # and one is there again after it
    finally:
        runtime.close()


def test_a_run_that_comes_while_the_replacement_starts_waits_for_it(
        settings: Settings, tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    try:
        runtime.prewarm([env])
        first = run_warm(runtime, env, "print(1)\n")
        assert runtime.warm.pool is not None
        key = (env.id, Limits.pooled(runtime.settings))
        starting = runtime.warm.pool.starting.get(key, 0)  # the replacement, importing TVM
        second = run_variant(parse_case({"script": "print(2)\n"}), "script", env, runtime)
        assert starting == 1 and first.status == second.status == "ok"
        assert second.isolation["warm"] is True  # it took that one: TVM imported once
    finally:
        runtime.close()


class _FakeSandbox:
    """Never started: the start functions below fail before one exists."""

    def alive(self) -> bool:
        return False

    def discard(self) -> None:
        pass


def _failing_start(fault: Exception) -> Callable[[object], _FakeSandbox]:
    def start(key: object) -> _FakeSandbox:
        raise fault
    return start


def _start_fault_record(caplog: pytest.LogCaptureFixture, fault: Exception) -> logging.LogRecord:
    """The one record the pool logs when starting a sandbox fails with `fault`."""
    pool: WarmPool[_FakeSandbox] = WarmPool(_failing_start(fault), size=1, idle_s=60.0)
    try:
        with caplog.at_level(logging.WARNING, logger="worker.runtimes.pool"):
            pool.fill(("tvm-x-cpu", "limits"))
            assert pool.take(("tvm-x-cpu", "limits"), replace=False) is None  # waits for the start
    finally:
        pool.close()
    (record,) = [r for r in caplog.records if r.name == "worker.runtimes.pool"]
    return record


def test_a_known_start_fault_logs_one_line_with_its_message(
        caplog: pytest.LogCaptureFixture) -> None:
    fault = RuntimeFault("image tvmrepro/x is not on the engine; build it with: "
                         "tvmrepro images build x")
    record = _start_fault_record(caplog, fault)
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert record.getMessage() == f"no warm sandbox for tvm-x-cpu yet: {fault}"


def test_an_unexpected_start_fault_logs_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    fault = ValueError("an unexpected fault")
    record = _start_fault_record(caplog, fault)
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.exc_info[1] is fault  # the fault itself, with its traceback
    assert "tvm-x-cpu" in record.getMessage()
    assert "ValueError: an unexpected fault" in caplog.text  # the traceback is in the log


class _StartedSandbox:
    """What a start function without a sandbox behind it hands the pool (the pool's own
    scheduling is under test, not a sandbox)."""

    def alive(self) -> bool:
        return True

    def discard(self) -> None:
        pass


def test_a_replacement_waits_for_runs_to_stop_unless_a_run_needs_it() -> None:
    started: list[object] = []

    def start(key: object) -> _StartedSandbox:
        started.append(key)
        return _StartedSandbox()

    pool: WarmPool[_StartedSandbox] = WarmPool(start, size=1, idle_s=60.0)
    try:
        with pool.running():  # a run of this process: another environment's refill waits
            pool.fill("other-env")
            time.sleep(3 * QUIET_S)
            assert started == []
            # A run that needs a requested sandbox has it started at once, runs or not.
            pool.fill("needed-env")
            assert pool.take("needed-env", replace=False) is not None
            assert started == ["needed-env"]
        deadline = time.monotonic() + 10 * QUIET_S
        while pool.count("other-env") == 0:  # started once runs were quiet
            assert time.monotonic() < deadline, "the replacement never started"
            time.sleep(0.05)
        assert started == ["needed-env", "other-env"]
    finally:
        pool.close()


def _available_mib() -> float:
    with open("/proc/meminfo") as meminfo:
        fields = dict(line.split(":", 1) for line in meminfo)
    return int(fields["MemAvailable"].split()[0]) / 1024


def test_a_worker_warms_its_environments_at_start_only_when_they_fit() -> None:
    """At this host's memory: a worker of 2 processes (the least one has) warms at start the
    environments whose sandboxes fit in the share by a margin, not those past it by a margin.
    The margin (25%) covers what other processes take or free meanwhile."""
    sandboxes = WARM_AT_START_SHARE * _available_mib() / WARM_SANDBOX_MIB  # that fit, in all
    processes = 2
    below, above = int(sandboxes / processes * 0.75), int(sandboxes / processes * 1.25) + 1
    assert below > ALWAYS_AT_START, f"too little memory available to tell ({sandboxes:.1f})"
    assert warm_at_start(environments=below, processes=processes)
    assert not warm_at_start(environments=above, processes=processes)
    # A few are warmed whatever the memory: at a number of processes for which they do not fit,
    # one more environment is not.
    too_many = int(sandboxes / ALWAYS_AT_START * 1.25) + 1
    assert warm_at_start(environments=ALWAYS_AT_START, processes=too_many)
    assert not warm_at_start(environments=ALWAYS_AT_START + 1, processes=too_many)
