"""The real service with the Docker runtime: a worker killed mid-run leaves nothing running."""

from __future__ import annotations

import time
from pathlib import Path

import docker
import pytest

from tests.conftest import NEW_ENV
from tests.fixtures.docker_engine import runs_left, sandbox_containers, stacks_containers
from tests.service.stack import Backend, Stack, dump, founding_body, make_home, sleeping_script
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings

pytestmark = [pytest.mark.docker, pytest.mark.tvm, pytest.mark.timeout(300)]


def workers_containers(client: docker.DockerClient) -> list[dict]:
    """The running sandbox containers of the stack's workers (a run's container may be a warm
    one, labelled before it knew its run)."""
    return [c for c in stacks_containers(client) if c["State"] == "running"]


def settled(client: docker.DockerClient) -> set[str]:
    """The stack's running containers once no more appear: the engine completes a warm
    container's start that the killed worker had asked for just before it died."""
    seen = {c["Id"] for c in workers_containers(client)}
    while True:
        time.sleep(1.0)
        now = {c["Id"] for c in workers_containers(client)}
        if now == seen:
            return now
        seen = now


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
        stack._until(lambda: workers_containers(docker_client), "the run's container")
        running = {c["Id"] for c in workers_containers(docker_client)}
        stack.kill(worker)  # main and pool processes at once; the containers live on
        orphans = settled(docker_client)
        assert running <= orphans, dump(sorted(orphans))
        stack.start_worker(NEW_ENV)  # returns once it heartbeats, after its start-up sweep
        assert orphans.isdisjoint(c["Id"] for c in sandbox_containers(docker_client))
        done = stack.wait(job["id"])
        (only,) = done["runs"]
        assert done["status"] == "done" and only["result"]["status"] == "ok", dump(done)
        assert only["deliveries"] == 2
        assert only["result"]["isolation"]["runtime"] == "docker"
    finally:
        stack.close(clean=True)  # a killed worker would leave its warm containers
    assert runs_left(docker_client) == []
