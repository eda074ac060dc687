"""The local sandbox against hostile scripts, with real TVM: each ends as a result with a status.

The runs take warm sandboxes (a pool kept by one runtime for the module), as a worker's do.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import NEW_ENV
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm

HOSTILE = {
    "segfault": ("import ctypes\nctypes.string_at(0)\n", "crash"),
    "busy_loop": ("while True:\n    pass\n", "timeout"),
    "sleep_forever": ("import time\ntime.sleep(10**9)\n", "timeout"),
    # Refused by the address-space limit with nothing allocated: an error, not an `oom`.
    "alloc_64_gib": ("import numpy as np\nx = np.ones(64 * 2**30, dtype=np.uint8)\n", "error"),
    "fork_bomb": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        "timeout",
    ),
    "connect_loopback": (
        "import socket\nsocket.create_connection(('127.0.0.1', 6379), timeout=5)\n",
        "error",
    ),
    "stdout_flood_100mb": (
        "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1 << 20))\n",
        "ok",
    ),
    "write_etc": ("open('/etc/tvmrepro-was-here', 'w').write('x')\n", "error"),
}
HOSTILE_TIMEOUT_S = 6


def hostile_timeout_s(expected: str) -> int:
    """The time limit of a hostile case: short for the cases that only end by it, generous for
    those that end alone (a 100 MB flood on a loaded machine takes longer than 6 s)."""
    return HOSTILE_TIMEOUT_S if expected == "timeout" else 10 * HOSTILE_TIMEOUT_S


@pytest.fixture(scope="module")
def runtime(tvm_envs: dict[str, Environment], settings: Settings) -> Iterator[LocalRuntime]:
    """One local runtime keeping a sandbox of NEW_ENV warm."""
    local = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    local.prewarm([tvm_envs[NEW_ENV]])
    yield local
    local.close()


def run_script(script: str, env: Environment, runtime: LocalRuntime, **limits: int) -> Result:
    """Run a script-mode case in a warm local sandbox (waiting for one to be ready)."""
    from tests.worker.test_warm_sandboxes import run_warm

    return run_warm(runtime, env, script, **limits)


def processes_of(uid: int) -> list[str]:
    """Processes still running as a run's sandbox uid (there should be none after the run)."""
    out = subprocess.run(["ps", "-eo", "uid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split(None, 1)[0] == str(uid)]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_script_ends_with_status(name: str, tvm_envs: dict[str, Environment],
                                         runtime: LocalRuntime) -> None:
    script, expected = HOSTILE[name]
    env = tvm_envs[NEW_ENV]
    result = run_script(script, env, runtime, timeout_s=hostile_timeout_s(expected),
                        memory_mb=2048)
    assert result.status == expected, (result.message, result.log.stderr[-2000:])
    if name == "alloc_64_gib":  # the refusal itself, not some other error
        assert result.error_type == "MemoryError", result.message
    assert result.stage == "script"
    assert processes_of(result.isolation["uid"]) == []
    follow_up = run_script("print('still fine')\n", env, runtime)
    assert follow_up.status == "ok"
    assert follow_up.log.stdout == "still fine\n"


def test_segfault_names_the_signal(tvm_envs: dict[str, Environment],
                                   runtime: LocalRuntime) -> None:
    result = run_script(HOSTILE["segfault"][0], tvm_envs[NEW_ENV], runtime)
    assert result.signal == "SIGSEGV"
    # The harness's faulthandler and TVM's own handler both leave a backtrace in the log.
    assert "Fatal Python error: Segmentation fault" in result.log.stderr
    assert "Segfault encountered" in result.log.stderr


def test_output_flood_is_capped_and_marked(tvm_envs: dict[str, Environment],
                                           settings: Settings, runtime: LocalRuntime) -> None:
    result = run_script(HOSTILE["stdout_flood_100mb"][0], tvm_envs[NEW_ENV], runtime)
    assert result.log.truncated is True
    assert len(result.log.stdout) == settings.log_cap_bytes


def test_network_refused_and_etc_read_only(tvm_envs: dict[str, Environment],
                                           runtime: LocalRuntime) -> None:
    net = run_script(HOSTILE["connect_loopback"][0], tvm_envs[NEW_ENV], runtime)
    # Only the sandbox's own loopback exists: nothing listens there.
    assert net.error_type == "ConnectionRefusedError", net.message
    etc = run_script(HOSTILE["write_etc"][0], tvm_envs[NEW_ENV], runtime)
    assert "Read-only file system" in (etc.message or "")
    assert not os.path.exists("/etc/tvmrepro-was-here")


def test_caller_environment_and_home_are_hidden(tvm_envs: dict[str, Environment],
                                                settings: Settings,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh (cold) sandbox: the variable is set after the module's warm ones started.
    monkeypatch.setenv("TVMREPRO_SECRET_TOKEN", "hunter2")
    script = (
        "import os, json\n"
        "print(json.dumps({'env': dict(os.environ), 'home': os.listdir(os.path.expanduser('~root'))"
        " if os.path.isdir(os.path.expanduser('~root')) else []}))\n"
    )
    result = run_variant(parse_case({"script": script}), "script", tvm_envs[NEW_ENV],
                         LocalRuntime(settings))
    assert result.status == "ok", result.log.stderr
    assert "hunter2" not in result.log.stdout
    assert "TVMREPRO_SECRET_TOKEN" not in result.log.stdout
    assert ".ssh" not in result.log.stdout and ".cache" not in result.log.stdout


def test_sandbox_runs_unprivileged_without_network(tvm_envs: dict[str, Environment],
                                                   runtime: LocalRuntime) -> None:
    script = "import os, socket\nprint(os.getuid(), socket.if_nameindex())\n"
    result = run_script(script, tvm_envs[NEW_ENV], runtime)
    assert result.status == "ok", result.log.stderr
    uid, interfaces = result.log.stdout.split(" ", 1)
    assert int(uid) >= 200_000
    assert interfaces.strip() == "[(1, 'lo')]"  # only the empty namespace's own loopback
    assert result.isolation["sandbox"] == "bwrap"


def test_an_environment_not_provisioned_here_is_a_runtime_fault(tmp_path: Path) -> None:
    from tvmrepro.environments import default_catalog
    from tvmrepro.errors import RuntimeFault

    empty = Settings.from_env({"TVMREPRO_HOME": str(tmp_path)})
    with pytest.raises(RuntimeFault, match="not provisioned here.*tvmrepro env provision"):
        run_variant(parse_case({"script": "print(1)\n"}), "script", default_catalog().get(NEW_ENV),
                    LocalRuntime(empty))


def test_what_a_run_printed_before_its_time_limit_is_kept(tvm_envs: dict[str, Environment],
                                                           runtime: LocalRuntime) -> None:
    script = "import time\nprint('before the hang')\ntime.sleep(10**9)\n"
    result = run_script(script, tvm_envs[NEW_ENV], runtime, timeout_s=HOSTILE_TIMEOUT_S)
    assert result.status == "timeout"
    assert "before the hang" in result.log.stdout
