"""The Docker runtime bounds a run as the local runtime's run cgroup does (tests/worker/
test_run_cgroup.py): memory over all its processes and its /tmp is one limit (the container's
cgroup); io_uring is refused only where the engine's default seccomp profile refuses it
(Docker 25 and later: not the tests' engine, an expected failure here)."""

from __future__ import annotations

import pytest

from tests.conftest import NEW_ENV
from tests.docker.test_docker_runtime import run_script
from tests.worker.test_run_cgroup import GREEDY, IO_URING
from tvmrepro.environments import Environment
from worker.runtimes.docker import DockerRuntime

pytestmark = [pytest.mark.docker, pytest.mark.tvm]


def test_memory_over_processes_and_tmpfs_is_one_limit(docker_runtime: DockerRuntime,
                                                      docker_envs: dict[str, Environment]
                                                      ) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], GREEDY, memory_mb=1536,
                        timeout_s=60)
    assert result.status == "oom", (result.status, result.message, result.log.stdout,
                                     result.log.stderr[-2000:])


@pytest.mark.xfail(strict=True, reason="the Docker runtime filters system calls with the engine's "
                   "default seccomp profile, which refuses io_uring only from Docker 25; the "
                   "tests' engine (Debian's 20.10) allows it")
def test_io_uring_is_refused(docker_runtime: DockerRuntime,
                             docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], IO_URING)
    assert result.status == "ok", result.log.stderr[-2000:]
    code, error = result.log.stdout.split()
    assert code == "-1" and int(error) in (1, 38), result.log.stdout  # EPERM or ENOSYS
