"""Containers left behind by a killed worker are swept by label when the next one starts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import docker
import pytest

from tests.conftest import NEW_ENV, REPO
from tests.fixtures.docker_engine import runs_left, wait_for_container
from tvmrepro.environments import Environment
from tvmrepro.liveness import process_token
from tvmrepro.settings import Settings
from worker.runtimes.base import SandboxJob
from worker.runtimes.docker import DEADLINE_LABEL, OWNER_LABEL, RUN_LABEL, DockerRuntime

pytestmark = [pytest.mark.docker, pytest.mark.tvm]

# A process that runs one long case through the Docker runtime, as a worker's pool process does.
LONG_RUN = """
import sys
from tvmrepro.cases import parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.docker import DockerRuntime
case = parse_case({"script": "import time\\ntime.sleep(600)\\n", "timeout_s": 900})
env = default_catalog().get(sys.argv[1])
run_variant(case, "script", env, DockerRuntime(Settings.from_env()), run_id=sys.argv[2])
"""


def _running(client: docker.DockerClient, run_id: str) -> bool:
    return bool(client.api.containers(filters={"label": f"{RUN_LABEL}={run_id}",
                                               "status": "running"}))


def test_kill_9_leaves_a_container_that_the_next_start_removes(
        docker_settings: Settings, docker_envs: dict[str, Environment],
        docker_client: docker.DockerClient) -> None:
    environ = {**os.environ, "DOCKER_HOST": str(docker_settings.docker_host),
               "TVMREPRO_HOME": str(docker_settings.home), "PYTHONPATH": str(REPO)}
    worker = subprocess.Popen([sys.executable, "-c", LONG_RUN, NEW_ENV, "killed-run"], env=environ)
    try:
        wait_for_container(docker_client, "killed-run")
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    time.sleep(1)
    assert _running(docker_client, "killed-run")  # nobody cleaned up: the worker died
    runtime = DockerRuntime(docker_settings)  # what a worker does when it starts
    assert "killed-run" in runtime.swept
    assert runs_left(docker_client) == []


def test_sweep_spares_live_owners_until_their_deadline(
        docker_settings: Settings, docker_envs: dict[str, Environment],
        docker_client: docker.DockerClient) -> None:
    env = docker_envs[NEW_ENV]
    runtime = DockerRuntime(docker_settings)
    # Containers as another live process of this host (our parent) would have made them.
    parent = process_token(os.getppid())
    ids = []
    for run_id, deadline in (("live-owner", time.time() + 600), ("overdue", time.time() - 1)):
        created = docker_client.api.create_container(
            runtime.image_id(env), ["sleep", "600"],
            labels={RUN_LABEL: run_id, OWNER_LABEL: parent, DEADLINE_LABEL: str(int(deadline))},
            host_config=docker_client.api.create_host_config(network_mode="none"))
        docker_client.api.start(created["Id"])
        ids.append(created["Id"])
    try:
        swept = DockerRuntime(docker_settings).swept
        assert "overdue" in swept and "live-owner" not in swept
        assert _running(docker_client, "live-owner")
    finally:
        for container_id in ids:
            with contextlib.suppress(docker.errors.NotFound):  # the swept one is gone already
                docker_client.api.remove_container(container_id, force=True)
    assert runs_left(docker_client) == []


def test_labels_say_whose_container_it_is(docker_settings: Settings,
                                          docker_envs: dict[str, Environment],
                                          docker_client: docker.DockerClient) -> None:
    runtime = DockerRuntime(docker_settings)
    container_id = runtime._create(SandboxJob("labelled", "job-7", docker_envs[NEW_ENV],
                                              {"timeout_s": 5, "memory_mb": 256}, "script"))
    try:
        labels = docker_client.api.inspect_container(container_id)["Config"]["Labels"]
    finally:
        docker_client.api.remove_container(container_id, force=True, v=True)
    assert labels[RUN_LABEL] == "labelled" and labels["tvmrepro.job"] == "job-7"
    assert labels[OWNER_LABEL] == process_token()
    assert time.time() < float(labels[DEADLINE_LABEL]) < time.time() + 5 + 600
