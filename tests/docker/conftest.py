"""A real Docker engine for the tests, set up from nothing (as root, no registry needed).

The session starts its own dockerd (scripts/dockerd: own socket, data root and
exec root in a fresh temporary directory, stopped at the end), imports the
stand-in base image (scripts/base-image: debootstrap once, the root file
system cached under the test home), fills a wheelhouse under the test home
(one download per wheel, ever) and builds the environment images offline from
it. Whether they run:
    TVMREPRO_WITH_DOCKER=1 (what `make check` sets)  they must run: missing tools fail
    TVMREPRO_WITH_DOCKER=0                            skipped, whatever is installed
    unset                                             run where the tools are, else skipped
Under CI=true they must run whatever TVMREPRO_WITH_DOCKER says: CI fails rather
than skips them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests.conftest import NEW_ENV, OLD_ENV, REPO
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings
from worker.images import Built, build_environment_image, fill_wheelhouse
from worker.runtimes.docker import JOB_LABEL, RUN_LABEL, DockerRuntime, connect

SCRIPTS = REPO / "scripts"
# The tag of the stand-in for python:3.11-slim that scripts/base-image makes.
BASE_IMAGE = "tvmrepro/stand-in-python:3.11-slim"
ENGINE_ARGS = ["--bridge=none"]  # no default bridge: never in the way of another engine's


def _missing_tools() -> str | None:
    if os.geteuid() != 0:
        return "the Docker tests start their own dockerd, which needs root"
    for tool in ("dockerd", "debootstrap", "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/bootstrap with TVMREPRO_WITH_DOCKER=1)"
    return None


TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def docker_tests_wanted(environ: dict[str, str] | os._Environ[str]) -> bool | None:
    """True: they must run; False: skip them; None: run them where they can run."""
    if environ.get("CI", "").lower() in TRUE:
        return True
    wanted = environ.get("TVMREPRO_WITH_DOCKER", "").lower()
    if wanted and wanted not in TRUE + FALSE:
        pytest.fail(f"TVMREPRO_WITH_DOCKER={wanted!r}: expected 1 or 0")
    return None if not wanted else wanted in TRUE


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """DOCKER_HOST of a private engine that lives as long as the test session."""
    wanted = docker_tests_wanted(os.environ)
    if wanted is False:
        pytest.skip("TVMREPRO_WITH_DOCKER=0")
    missing = _missing_tools()
    if missing:
        if wanted:
            pytest.fail(f"the Docker tests must run (CI or TVMREPRO_WITH_DOCKER=1) but {missing}")
        pytest.skip(missing)
    # Under /tmp, short: a unix socket path has at most 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="trd-", dir="/tmp"))
    started = subprocess.run([str(SCRIPTS / "dockerd"), "start", str(root), *ENGINE_ARGS],
                             capture_output=True, text=True, check=False)
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run([str(SCRIPTS / "dockerd"), "stop", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def docker_settings(settings: Settings, docker_host: str) -> Settings:
    """The test settings, with the Docker runtime on the private engine."""
    return settings.model_copy(update={"docker_host": docker_host, "runtime": "docker"})


@pytest.fixture(scope="session")
def docker_client(docker_settings: Settings) -> docker.DockerClient:
    """A client of the private engine."""
    return connect(docker_settings)


def engine_environ(docker_host: str) -> dict[str, str]:
    """The process environment for a command that talks to the private engine."""
    return {**os.environ, "DOCKER_HOST": docker_host}


@pytest.fixture(scope="session")
def base_image(docker_host: str, test_home: Path) -> str:
    """The stand-in base image, imported into the private engine."""
    made = subprocess.run([str(SCRIPTS / "base-image"), BASE_IMAGE, str(test_home / "base-images")],
                          capture_output=True, text=True, env=engine_environ(docker_host),
                          check=False)
    assert made.returncode == 0, made.stderr
    return BASE_IMAGE


@pytest.fixture(scope="session")
def wheelhouse(test_home: Path) -> Path:
    """Every wheel the two founding-case environments pin (downloaded once, kept)."""
    path = test_home / "wheelhouse"
    catalog = default_catalog()
    fill_wheelhouse([catalog.get(OLD_ENV), catalog.get(NEW_ENV)], path)
    return path


@pytest.fixture(scope="session")
def built_images(docker_settings: Settings, docker_client: docker.DockerClient, base_image: str,
                 wheelhouse: Path) -> dict[str, Built]:
    """The CPU images of both founding-case environments, built offline from the wheelhouse."""
    catalog = default_catalog()
    return {env_id: build_environment_image(docker_client, docker_settings, catalog.get(env_id),
                                            wheelhouse, base_image)
            for env_id in (OLD_ENV, NEW_ENV)}


@pytest.fixture(scope="session")
def docker_envs(built_images: dict[str, Built]) -> dict[str, Environment]:
    """The two environments whose images are built."""
    return {env_id: default_catalog().get(env_id) for env_id in built_images}


@pytest.fixture(scope="session")
def docker_runtime(docker_settings: Settings, docker_envs: dict[str, Environment]) -> DockerRuntime:
    """One Docker runtime for the session (as one worker process has)."""
    return DockerRuntime(docker_settings)


def sandbox_containers(client: docker.DockerClient) -> list[dict]:
    """Every sandbox container on the engine, running or not."""
    containers: list[dict] = client.api.containers(all=True, filters={"label": RUN_LABEL})
    return containers


def runs_left(client: docker.DockerClient) -> list[dict]:
    """Sandbox containers of runs (the pool's waiting ones are labelled job `warm`)."""
    return [c for c in sandbox_containers(client) if c["Labels"].get(JOB_LABEL) != "warm"]


def wait_for_container(client: docker.DockerClient, run_id: str, timeout_s: float = 60) -> dict:
    """The running container of `run_id`, once it runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = client.api.containers(filters={"label": f"{RUN_LABEL}={run_id}",
                                               "status": "running"})
        if found:
            return dict(found[0])
        time.sleep(0.1)
    raise AssertionError(f"no running container for run {run_id} after {timeout_s} s")
