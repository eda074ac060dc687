"""The real service with the Docker runtime: a worker killed mid-run leaves nothing running."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from tests.conftest import NEW_ENV
from tests.docker.conftest import sandbox_containers
from tests.service.stack import Backend, Stack, dump, founding_body, make_home, sleeping_script
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.runtimes.docker import JOB_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.tvm, pytest.mark.timeout(300)]


def job_containers(client: docker.DockerClient, job_id: str) -> list[dict]:
    """The running sandbox containers of one job."""
    found: list[dict] = client.api.containers(filters={"label": f"{JOB_LABEL}={job_id}",
                                                       "status": "running"})
    return found


def test_kill_9_of_a_docker_worker_mid_run(docker_settings: Settings,
                                           docker_envs: dict[str, Environment],
                                           docker_client: docker.DockerClient,
                                           tmp_path: Path, test_home: Path) -> None:
    stack = Stack(Backend("embedded"), make_home(tmp_path, test_home),
                  TVMREPRO_RUNTIME="docker", DOCKER_HOST=str(docker_settings.docker_host))
    try:
        stack.start_api()
        worker = stack.start_worker(NEW_ENV)
        job = stack.submit(founding_body(sleeping_script(4, "docker-kill"), [NEW_ENV]))
        stack.wait_running(job["id"])
        stack._until(lambda: job_containers(docker_client, job["id"]), "the run's container")
        (orphan,) = job_containers(docker_client, job["id"])
        stack.kill(worker)  # main and pool processes at once; the container lives on
        assert [c["Id"] for c in job_containers(docker_client, job["id"])] == [orphan["Id"]]
        stack.start_worker(NEW_ENV)  # returns once it heartbeats, after its start-up sweep
        assert orphan["Id"] not in {c["Id"] for c in sandbox_containers(docker_client)}
        done = stack.wait(job["id"])
        (only,) = done["runs"]
        assert done["status"] == "done" and only["result"]["status"] == "ok", dump(done)
        assert only["deliveries"] == 2
        assert only["result"]["isolation"]["runtime"] == "docker"
    finally:
        stack.close()
    assert sandbox_containers(docker_client) == []
