"""The local sandbox against hostile scripts, with real TVM: each ends as a result with a status.

The runs take warm sandboxes (a pool kept by one runtime for the module), as a worker's do.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import NEW_ENV
from tests.fixtures.hostile_scripts import HOSTILE, HOSTILE_TIMEOUT_S, hostile_timeout_s
from tests.worker.sandboxes import processes_of, run_warm
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def runtime(tvm_envs: dict[str, Environment], settings: Settings) -> Iterator[LocalRuntime]:
    """One local runtime keeping a sandbox of NEW_ENV warm."""
    local = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    local.prewarm([tvm_envs[NEW_ENV]])
    yield local
    local.close()


def run_script(script: str, env: Environment, runtime: LocalRuntime, **limits: int) -> Result:
    """Run a script-mode case in a warm local sandbox (waiting for one to be ready)."""
    return run_warm(runtime, env, script, **limits)


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
