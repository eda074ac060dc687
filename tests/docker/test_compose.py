"""docker-compose.yml: accepted by Debian's docker-compose 1.29, and `up` serves the founding case."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import yaml

from tests.conftest import NEW_ENV, OLD_ENV, REPO, shared_case
from tests.docker.conftest import SCRIPTS, engine_environ, sandbox_containers
from tests.service.stack import free_port
from tvmrepro.cases import load_case_file
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.images import build_service_image, download_wheels, service_requirements
from worker.runtimes.docker import JOB_LABEL

REDIS_IMAGE = "tvmrepro/stand-in-redis:7"
SERVICE_IMAGE = "tvmrepro/service:test"
UP_TIMEOUT_S = 180


def compose() -> str:
    """The docker-compose command (Debian's 1.29), or a skip/failure when it is missing."""
    found = shutil.which("docker-compose")
    if found is None:
        if os.environ.get("TVMREPRO_WITH_DOCKER") == "1":
            pytest.fail("TVMREPRO_WITH_DOCKER=1 but docker-compose is not installed")
        pytest.skip("docker-compose is not installed")
    return found


def config(*args: str) -> dict[str, Any]:
    """The compose file as docker-compose resolves it."""
    out = subprocess.run([compose(), *args, "config"], cwd=REPO, capture_output=True, text=True,
                         check=False, env={**os.environ, "DOCKER_HOST": "unix:///nonexistent"})
    assert out.returncode == 0, out.stderr
    resolved: dict[str, Any] = yaml.safe_load(out.stdout)
    return resolved


def test_compose_file_is_accepted_and_wired() -> None:
    plain, cuda = config(), config("--profile", "cuda")
    assert set(plain["services"]) == {"redis", "api", "worker", "worker-cuda"}
    redis_command = " ".join(plain["services"]["redis"]["command"])
    assert "--appendonly yes" in redis_command and "--maxmemory-policy noeviction" in redis_command
    worker = plain["services"]["worker"]
    assert worker["environment"]["TVMREPRO_RUNTIME"] == "docker"
    assert any(v.get("target") == "/var/run/docker.sock" if isinstance(v, dict)
               else ":/var/run/docker.sock" in v for v in worker["volumes"])
    assert "--env tvm-0.27.0.post1-cpu" in str(worker["command"])
    assert "gunicorn" not in plain["services"]["api"]["command"]  # `tvmrepro serve` runs it
    assert plain["services"]["api"]["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    assert cuda["services"]["worker-cuda"]["profiles"] == ["cuda"]
    assert "tvm-0.27.0.post1-cuda" in str(cuda["services"]["worker-cuda"]["command"])


@pytest.fixture
def compose_stack(docker_host: str, docker_settings: Settings, docker_client: docker.DockerClient,
                  docker_envs: dict[str, Environment], base_image: str,
                  test_home: Path) -> Iterator[str]:
    """`docker-compose up` of this checkout on the private engine; the API's URL."""
    wheels = test_home / "wheelhouse-service"
    download_wheels(service_requirements(), wheels, docker_envs[NEW_ENV].python, deps=True)
    build_service_image(docker_client, docker_settings, wheels, base_image, tag=SERVICE_IMAGE)
    made = subprocess.run([str(SCRIPTS / "redis-image"), REDIS_IMAGE, base_image],
                          capture_output=True, text=True, env=engine_environ(docker_host),
                          check=False)
    assert made.returncode == 0, made.stderr
    port = free_port()
    environ = {**engine_environ(docker_host), "TVMREPRO_SERVICE_IMAGE": SERVICE_IMAGE,
               "TVMREPRO_REDIS_IMAGE": REDIS_IMAGE, "TVMREPRO_PORT": str(port),
               "DOCKER_SOCKET": docker_host.removeprefix("unix://")}
    project = [compose(), "--project-name", f"trtest{os.getpid()}"]
    up = subprocess.run([*project, "up", "-d", "--no-build"], cwd=REPO, env=environ,
                        capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False)
    try:
        assert up.returncode == 0, up.stderr
        yield f"http://127.0.0.1:{port}"
    finally:
        logs = subprocess.run([*project, "logs", "--no-color", "--tail", "50"], cwd=REPO,
                              env=environ, capture_output=True, text=True, check=False)
        print(logs.stdout[-6000:])
        subprocess.run([*project, "down", "--volumes", "--timeout", "10"], cwd=REPO, env=environ,
                       capture_output=True, check=False, timeout=UP_TIMEOUT_S)


def _until(ready: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if found := ready():
                return found
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"not ready after {timeout_s} s")


@pytest.mark.docker
@pytest.mark.tvm
@pytest.mark.timeout(600)
def test_compose_up_serves_the_founding_case(compose_stack: str,
                                             docker_client: docker.DockerClient) -> None:
    http = httpx.Client(base_url=compose_stack, timeout=30)
    _until(lambda: http.get("/healthz").json()["status"] == "ok", UP_TIMEOUT_S)
    served = _until(lambda: {e["id"]: e for e in http.get("/api/v1/environments").json()
                             ["environments"] if e["workers"]}, 60)
    assert set(served) == {OLD_ENV, NEW_ENV}
    assert served[OLD_ENV]["fingerprint"]["version"] == "0.25.0"  # read from the image
    case = load_case_file(shared_case("tvm-17357/case.json")).model_dump(mode="json")
    posted = http.post("/api/v1/jobs", json={"kind": "run", "case": case,
                                             "environments": [OLD_ENV, NEW_ENV]})
    assert posted.status_code == 202, posted.text
    job = _until(lambda: (j := http.get(f"/api/v1/jobs/{posted.json()['id']}").json())["status"]
                 in ("done", "failed") and j, 120)
    results = {(r["variant"], r["environment"]): r["result"] for r in job["runs"]}
    assert len(results) == 4
    for (variant, _), result in results.items():
        expected = ("error", "vm_init") if variant == "fusetir-once" else ("ok", "vm_init")
        assert (result["status"], result["stage"]) == expected, result
        assert result["isolation"]["runtime"] == "docker"
    # Every run's container is gone; what is left waits, warm, for the next case.
    labels = [c["Labels"] for c in sandbox_containers(docker_client)]
    assert [lab for lab in labels if lab.get(JOB_LABEL) == job["id"]] == []
    assert all(lab.get(JOB_LABEL) == "warm" for lab in labels), labels
