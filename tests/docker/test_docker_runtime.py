"""The Docker runtime on a real engine: the founding case, hostile scripts, the container's flags."""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.conftest import MISSING_FUNCTION, NEW_ENV, OLD_ENV, case_path
from tests.docker.runs import run_script
from tests.fixtures.docker_engine import runs_left, wait_for_container
from tests.fixtures.hostile_scripts import FORGE, HOSTILE, hostile_timeout_s
from tests.worker.sandboxes import wait_warm
from tvmrepro.cases import load_case_file, parse_case
from tvmrepro.environments import Environment
from tvmrepro.errors import RuntimeFault
from tvmrepro.lifecycle import harness_digest
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.base import PTYS_MAX, TMPFS_INODES, SandboxJob
from worker.runtimes.docker import JOB_LABEL, RUN_LABEL, DockerRuntime
from worker.runtimes.local import LocalRuntime
from worker.runtimes.syscalls import docker_profile

pytestmark = [pytest.mark.docker, pytest.mark.tvm]
# Every variable a case may see in its container: the runtime's scrubbed set, HOSTNAME (the
# engine's own), and what the image recipes set (Config.Env). Nothing of the worker's.
CASE_ENVIRON = {"PATH", "HOME", "LANG", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
                "TVM_BACKTRACE", "TVM_NUM_THREADS", "HOSTNAME"}
IMAGE_ENVIRON = {"PATH", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "HOME", "LANG", "TVM_BACKTRACE"}


def cells(runs: list[Result]) -> dict[tuple[str, str], tuple[str, str | None, str | None]]:
    """(environment, variant) -> (status, stage, signature)."""
    return {(r.environment, r.variant): (r.status.value, r.stage, r.signature) for r in runs}


@pytest.fixture(scope="module")
def warm_docker(docker_settings: Settings,
                docker_envs: dict[str, Environment]) -> Iterator[DockerRuntime]:
    """A Docker runtime keeping one container of NEW_ENV warm, as a worker's does."""
    runtime = DockerRuntime(docker_settings.model_copy(update={"warm_sandboxes": 1}))
    runtime.prewarm([docker_envs[NEW_ENV]])
    yield runtime
    runtime.close()


def run_warm(runtime: DockerRuntime, env: Environment, script: str, **limits: int) -> Result:
    """Run a script case in the warm container (waiting for one first); check it was warm."""
    wait_warm(runtime, env)  # any runtime with a pool and settings
    result = run_script(runtime, env, script, **limits)
    assert result.isolation["warm"] is True
    return result


def test_founding_case_matches_the_local_runtime(docker_runtime: DockerRuntime,
                                                 docker_envs: dict[str, Environment],
                                                 tvm_envs: dict[str, Environment],
                                                 settings: Settings) -> None:
    case = load_case_file(case_path("tvm-17357/case.json"))
    local = LocalRuntime(settings)
    in_docker, here = [], []
    for env_id in (OLD_ENV, NEW_ENV):
        for variant in case.variant_names:
            in_docker.append(run_variant(case, variant, docker_envs[env_id], docker_runtime))
            here.append(run_variant(case, variant, tvm_envs[env_id], local))
    assert cells(in_docker) == cells(here)
    once = [r for r in in_docker if r.variant == "fusetir-once"]
    twice = [r for r in in_docker if r.variant == "fusetir-twice"]
    assert {(r.status.value, r.stage) for r in once} == {("error", "vm_init")}
    assert MISSING_FUNCTION in (once[0].signature or "")
    assert once[0].signature == once[1].signature
    assert {r.status.value for r in twice} == {"ok"}
    assert [p.name for p in once[0].passes] == ["FuseTIR", "LambdaLift", "AllocateWorkspace"]
    assert {r.tvm["version"] for r in in_docker if r.tvm} == {"0.25.0", "0.27.0.post1"}
    assert all(r.isolation["runtime"] == "docker" for r in in_docker)
    assert {r.isolation["harness"] for r in in_docker} == {harness_digest()}


# Every case in a warm container (the service's path); in a fresh one, the cases that end by what
# the container itself enforces (its own time limit, its pids limit, a signal read from its exit
# status, its read-only root). The rest of the fresh path's flags: the tests below.
COLD = ("busy_loop", "fork_bomb", "segfault", "write_etc")


@pytest.mark.parametrize(("name", "warm"), [
    *(pytest.param(name, True, id=f"{name}-warm") for name in sorted(HOSTILE)),
    *(pytest.param(name, False, id=f"{name}-cold") for name in COLD)])
def test_hostile_script_ends_with_status(name: str, warm: bool, request: pytest.FixtureRequest,
                                         docker_envs: dict[str, Environment],
                                         docker_client: docker.DockerClient) -> None:
    script, expected = HOSTILE[name]
    env = docker_envs[NEW_ENV]
    runtime = request.getfixturevalue("warm_docker" if warm else "docker_runtime")
    run = run_warm if warm else run_script
    result = run(runtime, env, script, timeout_s=hostile_timeout_s(expected), memory_mb=2048)
    assert result.status == expected, (result.message, result.log.stderr[-2000:])
    assert result.stage == "script"
    assert runs_left(docker_client) == []
    follow_up = run(runtime, env, "print('still fine')\n")
    assert (follow_up.status, follow_up.log.stdout) == ("ok", "still fine\n"), follow_up.message


def test_memory_growth_ends_as_oom(docker_runtime: DockerRuntime,
                                   docker_envs: dict[str, Environment]) -> None:
    # Grows in small steps: the case's own memory limit ends it (in a warm container the
    # child runs under the case's address-space limit; a fresh one also under its cgroup).
    script = "chunks = []\nwhile True:\n    chunks.append(bytearray(32 << 20))\n"
    env = docker_envs[NEW_ENV]
    result = run_script(docker_runtime, env, script, memory_mb=512)
    assert (result.status, result.stage) == ("oom", "script"), (result.message, result.isolation)


def test_segfault_names_the_signal(docker_runtime: DockerRuntime,
                                   docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], HOSTILE["segfault"][0])
    assert result.signal == "SIGSEGV"
    # Both handlers run in the case's process, whatever the runtime: the harness's
    # faulthandler (the Python traceback), then TVM's own (its C++ backtrace).
    assert "Fatal Python error: Segmentation fault" in result.log.stderr
    assert "Segfault encountered" in result.log.stderr


def test_output_flood_is_capped_and_marked(docker_runtime: DockerRuntime,
                                           docker_envs: dict[str, Environment],
                                           docker_settings: Settings) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], HOSTILE["stdout_flood_100mb"][0])
    assert result.log.truncated is True
    assert len(result.log.stdout) == docker_settings.log_cap_bytes


def test_timeout_still_says_where_the_run_was(docker_runtime: DockerRuntime,
                                              docker_envs: dict[str, Environment]) -> None:
    script = "import tvm\nprint('before', flush=True)\nwhile True:\n    pass\n"
    result = run_script(docker_runtime, docker_envs[OLD_ENV], script, timeout_s=4)
    assert result.status == "timeout"
    assert result.stage == "script"  # from the events read back after the kill
    assert result.tvm and result.tvm["version"] == "0.25.0"
    assert result.log.stdout == "before\n"


def test_sandbox_is_unprivileged_offline_and_scrubbed(docker_runtime: DockerRuntime,
                                                      docker_envs: dict[str, Environment],
                                                      docker_client: docker.DockerClient,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TVMREPRO_SECRET_TOKEN", "hunter2")  # in the worker's own environment
    script = ("import json, os, socket\n"
              "init = open('/proc/1/environ', 'rb').read().split(b'\\0')\n"
              "print(json.dumps({'uid': os.getuid(), 'gid': os.getgid(), 'env': dict(os.environ),"
              " 'init': sorted(v.decode().split('=', 1)[0] for v in init if v),"
              " 'nics': [n for _, n in socket.if_nameindex()],"
              " 'caps': [l for l in open('/proc/self/status') if l.startswith('CapEff')][0]}))\n")
    result = run_script(docker_runtime, docker_envs[NEW_ENV], script)
    assert result.status == "ok", result.log.stderr
    seen: dict[str, Any] = json.loads(result.log.stdout)
    assert (seen["uid"], seen["gid"]) == (10001, 10001)
    assert seen["nics"] == ["lo"]
    assert seen["caps"].split()[1] == "0000000000000000"
    # The case's and the container's first process's environments, and the image's, each
    # exactly the allowed names: whatever the worker has, none of it reaches the case.
    image_env = docker_client.api.inspect_image(docker_envs[NEW_ENV].image)["Config"]["Env"]
    image_names = {line.split("=", 1)[0] for line in image_env or []}
    assert image_names == IMAGE_ENVIRON, image_names ^ IMAGE_ENVIRON
    assert set(seen["env"]) == CASE_ENVIRON, set(seen["env"]) ^ CASE_ENVIRON
    assert set(seen["init"]) == set(seen["env"])
    assert "hunter2" not in result.log.stdout


def test_container_carries_every_limit_and_label(docker_runtime: DockerRuntime,
                                                 docker_envs: dict[str, Environment],
                                                 docker_client: docker.DockerClient,
                                                 docker_settings: Settings) -> None:
    results: list[Result] = []
    runner = threading.Thread(target=lambda: results.append(run_script(
        docker_runtime, docker_envs[NEW_ENV], "import time\ntime.sleep(30)\n", run_id="flags-run",
        timeout_s=3, memory_mb=1024)))
    runner.start()
    info = docker_client.api.inspect_container(wait_for_container(docker_client, "flags-run")["Id"])
    runner.join()
    host, config = info["HostConfig"], info["Config"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges", f"seccomp={docker_profile()}"]
    assert host["PidsLimit"] == docker_settings.sandbox_pids
    assert host["Memory"] == host["MemorySwap"] == 1024 << 20
    assert host["NanoCpus"] == int(docker_settings.sandbox_cpus * 1e9)
    assert host["Init"] is True
    assert "exec" in host["Tmpfs"]["/tmp"].split(",")
    assert all(f"nr_inodes={TMPFS_INODES}" in host["Tmpfs"][top].split(",")
               for top in ("/tmp", "/dev/shm"))
    (ptys,) = [m for m in host["Mounts"] if m["Target"] == "/dev/pts"]
    assert f"max={PTYS_MAX}" in ptys["VolumeOptions"]["DriverConfig"]["Options"]["o"]
    assert host["LogConfig"]["Config"]["max-size"] == "1m"
    assert config["User"] == "10001:10001"
    assert config["Labels"][RUN_LABEL] == "flags-run" and config["Labels"][JOB_LABEL] == "local"
    assert [r.status.value for r in results] == ["timeout"]
    assert runs_left(docker_client) == []


def test_cuda_environments_ask_the_engine_for_the_gpu(docker_runtime: DockerRuntime,
                                                     docker_envs: dict[str, Environment],
                                                     docker_client: docker.DockerClient) -> None:
    # The CPU image under a CUDA environment: the engine takes the request at creation (it is
    # checked against the GPUs only at start), so what it received can be read back here.
    cpu = docker_envs[NEW_ENV]
    received = {}
    for env in (dataclasses.replace(cpu, device="cuda"), cpu):
        job = SandboxJob(f"gpu-{uuid.uuid4().hex}", "test", env,
                         {"timeout_s": 10, "memory_mb": 1024}, "script")
        container_id = docker_runtime._create(job)
        try:
            host = docker_client.api.inspect_container(container_id)["HostConfig"]
            received[env.device] = host["DeviceRequests"]
        finally:
            docker_runtime._remove(container_id)
    assert received["cuda"] == [{"Driver": "", "Count": -1, "DeviceIDs": [],
                                 "Capabilities": [["gpu"]], "Options": {}}]
    assert received["cpu"] in (None, [])
    assert runs_left(docker_client) == []


def test_missing_image_is_a_runtime_fault_that_says_how_to_build(
        docker_runtime: DockerRuntime, docker_envs: dict[str, Environment]) -> None:
    # An environment whose image tag no engine has (whatever else this engine holds).
    unbuilt = dataclasses.replace(docker_envs[NEW_ENV], id="tvm-0.0.0-cpu",
                                  image=f"tvmrepro/tvm:never-built-{uuid.uuid4().hex}")
    with pytest.raises(RuntimeFault, match="tvmrepro images build tvm-0.0.0-cpu"):
        run_script(docker_runtime, unbuilt, "print(1)\n")


def test_image_with_other_pins_is_refused(docker_runtime: DockerRuntime,
                                          docker_envs: dict[str, Environment]) -> None:
    # The same image, asked for by an environment that pins another TVM: stale, so refused.
    other = dataclasses.replace(docker_envs[NEW_ENV], id="tvm-9.9.9-cpu",
                                packages={**docker_envs[NEW_ENV].packages, "apache-tvm": "9.9.9"})
    with pytest.raises(RuntimeFault, match="does not carry the pins"):
        docker_runtime.image_id(other)


def test_fingerprint_comes_from_the_image(docker_runtime: DockerRuntime,
                                          docker_envs: dict[str, Environment],
                                          docker_client: docker.DockerClient) -> None:
    facts = docker_runtime.fingerprint(docker_envs[OLD_ENV])
    assert facts["version"] == "0.25.0"
    assert facts["packages"] == docker_envs[OLD_ENV].packages
    assert {"FuseTIR", "LambdaLift", "AllocateWorkspace"} <= set(facts["passes"])
    assert runs_left(docker_client) == []


def test_image_with_another_harness_is_refused(docker_runtime: DockerRuntime,
                                               docker_envs: dict[str, Environment],
                                               docker_client: docker.DockerClient) -> None:
    import io

    from worker.environments.images import HARNESS_LABEL

    # The environment's own image and pins, labelled with another harness: its results
    # would be cached under this harness's key, so it must not run.
    env = docker_envs[NEW_ENV]
    stale_tag = "tvmrepro/tvm:stale-harness-test"
    recipe = f"FROM {env.image}\nLABEL {HARNESS_LABEL}=0000stale\n".encode()
    list(docker_client.api.build(fileobj=io.BytesIO(recipe), tag=stale_tag, rm=True))
    stale = dataclasses.replace(env, image=stale_tag)
    fresh_runtime = DockerRuntime(docker_runtime.settings, docker_client)
    try:
        with pytest.raises(RuntimeFault, match="harness '0000stale'") as caught:
            run_script(fresh_runtime, stale, "print(1)\n")
        assert harness_digest() in str(caught.value) and "--rebuild" in str(caught.value)
        with pytest.raises(RuntimeFault, match="harness"):
            fresh_runtime.fingerprint(stale)
        assert runs_left(docker_client) == []  # refused before any container
    finally:
        docker_client.api.remove_image(stale_tag, force=True)


def test_a_forged_result_is_not_believed(docker_runtime: DockerRuntime,
                                         docker_envs: dict[str, Environment]) -> None:
    """A case that writes a result (to every descriptor, and to the events file) and aborts."""
    forge_file = ("import json\nwith open('/out/events.jsonl', 'a') as f:\n"
                  "    f.write(json.dumps({'event': 'result', 'status': 'ok'}) + '\\n')\n")
    result = run_script(docker_runtime, docker_envs[NEW_ENV], FORGE + forge_file + "os.abort()\n",
                        timeout_s=30)
    assert (result.status, result.error_type) == ("crash", "SIGABRT"), result.message
    assert result.outputs is None
    assert result.tvm is not None and result.tvm["version"] == "0.27.0.post1"


def test_a_self_inflicted_sigkill_is_a_crash_not_oom(docker_runtime: DockerRuntime,
                                                     docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV],
                        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert (result.status, result.signal) == ("crash", "SIGKILL"), result.message


def test_what_a_run_leaves_in_a_warm_container_is_not_seen_by_the_next(
        warm_docker: DockerRuntime, docker_envs: dict[str, Environment]) -> None:
    env = docker_envs[NEW_ENV]
    leave = ("import os, subprocess\n"
             "open('/tmp/left-behind', 'w').write('x')\n"
             "subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
             "print(os.path.exists('/tmp/left-behind'))\n")
    look = ("import os\n"
            "names = [open(f'/proc/{p}/cmdline').read() for p in os.listdir('/proc') if p.isdigit()]\n"
            "print(os.path.exists('/tmp/left-behind'), any('sleep' in n for n in names))\n")
    first = run_warm(warm_docker, env, leave)
    second = run_warm(warm_docker, env, look)
    assert (first.status, first.log.stdout) == ("ok", "True\n"), first.log.stderr[-2000:]
    assert (second.status, second.log.stdout) == ("ok", "False False\n"), second.log.stderr[-2000:]
    assert first.isolation["image_id"] == second.isolation["image_id"]


def test_reserved_containers_are_taken_by_the_runs_they_were_started_for(
        docker_settings: Settings, docker_envs: dict[str, Environment],
        docker_client: docker.DockerClient) -> None:
    runtime = DockerRuntime(docker_settings.model_copy(update={"warm_sandboxes": 0}))
    try:
        for env in docker_envs.values():
            runtime.reserve(env, timeout_s=30, memory_mb=1024)
        assert len(runs_left(docker_client)) == 2
        case = parse_case({"script": "print('hi')\n", "timeout_s": 30, "memory_mb": 1024})
        runs = [run_variant(case, "script", docker_envs[env_id], runtime)
                for env_id in (OLD_ENV, NEW_ENV, NEW_ENV)]
        assert [r.status.value for r in runs] == ["ok", "ok", "ok"], runs[0].message
        assert [r.isolation["warm"] for r in runs] == [True, True, False]  # none replaced
        runtime.reserve(docker_envs[NEW_ENV], timeout_s=30, memory_mb=1024)
    finally:
        runtime.close()
    assert runs_left(docker_client) == []  # the one no run took went with the runtime
