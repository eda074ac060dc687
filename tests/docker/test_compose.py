"""docker-compose.yml: accepted by Debian's docker-compose 1.29; `up` alone serves the founding
case (the worker builds the images it lacks) behind its front (nginx, which holds slow clients
off the API's threads), and `down` then `up` keeps every job."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import yaml

from cli.commands.service import default_environments
from tests.conftest import NEW_ENV, REPO, case_path
from tests.fixtures.docker_engine import (
    BASE_IMAGE_CACHE,
    SCRIPTS,
    docker_tests_wanted,
    engine_environ,
    filling,
    sandbox_containers,
)
from tests.fixtures.slow_clients import siege
from tests.service.stack import free_port
from tvmrepro.cases import load_case_file
from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings
from worker.environments.images import (
    build_service_image,
    current_image,
    download_wheels,
    service_requirements,
)
from worker.runtimes.docker import JOB_LABEL, OWNER_LABEL

REDIS_IMAGE = "tvmrepro/stand-in-redis:7"
POSTGRES_IMAGE = "tvmrepro/stand-in-postgres:16"
SERVICE_IMAGE = "tvmrepro/service:test"
FRONT_IMAGE = "tvmrepro/front:test"
# The stand-in for debian:bookworm-slim with nginx-light (no package mirror in a build here).
FRONT_BASE_IMAGE = "tvmrepro/stand-in-debian-nginx:bookworm"
UP_TIMEOUT_S = 180
# The worker builds the image (offline, from the wheelhouse) before it runs its jobs.
BUILD_TIMEOUT_S = 900
# The environment the test's worker serves: one is enough to see the worker build its image
# and a job wait for it (the default, three, is checked on the file); each costs a build.
SERVED = (NEW_ENV,)
# `--scale worker=3`, then a job of 9 runs: one at a time per worker, so each takes some.
SCALED_WORKERS = 3
SPREAD_RUNS = 9


def compose() -> str:
    """The docker-compose command (Debian's 1.29), or a skip/failure when it is missing."""
    found = shutil.which("docker-compose")
    if found is None:
        why = "docker-compose is not installed (scripts/bootstrap with TVMREPRO_WITH_DOCKER=1)"
        if docker_tests_wanted(os.environ):  # under CI, or asked for
            pytest.fail(f"the Docker tests must run, but {why}", pytrace=False)
        pytest.skip(why)
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
    services = plain["services"]
    assert set(services) == {"postgres", "redis", "api", "front", "worker", "worker-cuda"}
    redis_command = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis_command and "--maxmemory-policy noeviction" in redis_command
    worker = services["worker"]
    assert worker["environment"]["TVMREPRO_RUNTIME"] == "docker"
    assert any(v.get("target") == "/var/run/docker.sock" if isinstance(v, dict)
               else ":/var/run/docker.sock" in v for v in worker["volumes"])
    assert "gunicorn" not in services["api"]["command"]  # `tvmrepro serve` runs it
    # Clients reach the API through nginx only, which names each in X-Real-IP.
    assert "ports" not in services["api"] and services["front"]["ports"]
    assert services["api"]["environment"]["TVMREPRO_FRONT"] == "0"
    assert services["api"]["environment"]["TVMREPRO_CLIENT_HEADER"] == "X-Real-IP"
    assert services["front"]["depends_on"]["api"]["condition"] == "service_healthy"
    assert services["api"]["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    # The project's network reaches the API by its service name: a Host it answers to.
    assert "api" in services["api"]["environment"]["TVMREPRO_ALLOWED_HOSTS"].split(",")
    assert cuda["services"]["worker-cuda"]["profiles"] == ["cuda"]
    assert "tvm-0.27.0.post1-cuda" in str(cuda["services"]["worker-cuda"]["command"])


def test_compose_stores_jobs_in_postgres_in_a_volume() -> None:
    services = config()["services"]
    postgres = services["postgres"]
    assert postgres["image"] == "postgres:16"
    assert "pg_isready" in postgres["healthcheck"]["test"]
    assert any(str(v).startswith("postgres:/var/lib/postgresql/data") or
               (isinstance(v, dict) and v.get("source") == "postgres") for v in postgres["volumes"])
    for name in ("api", "worker"):
        assert services[name]["environment"]["DATABASE_URL"].startswith("postgresql://")
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_compose_serves_one_cpu_environment_of_each_minor_release_by_default(
        tmp_path: Path) -> None:
    command = shlex.split(str(config()["services"]["worker"]["command"]))
    assert command == ["tvmrepro", "worker"]  # no --env: `tvmrepro up`'s choice
    # A fresh home, as the worker's container has: nothing provisioned there.
    chosen = default_environments(Settings(home=tmp_path))
    assert [env.id for env in chosen] == ["tvm-0.25.0.post1-cpu", "tvm-0.26.0-cpu",
                                          "tvm-0.27.0.post1-cpu"]
    assert [env.id for env in chosen] == [env.id for env in default_catalog().spanning("cpu")]


def _stand_in(script: str, tag: str, base_image: str, docker_host: str) -> None:
    made = subprocess.run([str(SCRIPTS / script), tag, base_image], capture_output=True,
                          text=True, env=engine_environ(docker_host), check=False)
    assert made.returncode == 0, made.stderr


def _without_images(client: docker.DockerClient) -> None:
    """No image of the served environments on the engine: the worker must build them."""
    catalog = default_catalog()
    for env_id in SERVED:
        tag = catalog.get(env_id).image
        if client.images.list(name=tag):  # other tests built it earlier in this session
            client.api.remove_image(tag, force=True)


class Project:
    """One compose project of this checkout on the private engine."""

    def __init__(self, environ: dict[str, str]) -> None:
        self.environ = environ
        self.command = [compose(), "--project-name", f"trtest{os.getpid()}"]

    def __call__(self, *args: str, timeout_s: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess:
        return subprocess.run([*self.command, *args], cwd=REPO, env=self.environ,
                              capture_output=True, text=True, timeout=timeout_s, check=False)


@pytest.fixture
def compose_stack(docker_host: str, docker_settings: Settings, docker_client: docker.DockerClient,
                  base_image: str, wheelhouse: Path, test_home: Path) -> Iterator[Project]:
    """A compose project of this checkout on the private engine, not yet up."""
    with filling(test_home / "wheelhouse-service") as wheels:
        download_wheels(service_requirements(), wheels, default_catalog().get(NEW_ENV).python,
                        deps=True)
    build_service_image(docker_client, docker_settings, wheels, base_image, tag=SERVICE_IMAGE)
    _stand_in("redis-image", REDIS_IMAGE, base_image, docker_host)
    _stand_in("postgres-image", POSTGRES_IMAGE, base_image, docker_host)
    made = subprocess.run([str(SCRIPTS / "base-image"), FRONT_BASE_IMAGE,
                           str(test_home / BASE_IMAGE_CACHE)], capture_output=True, text=True,
                          env={**engine_environ(docker_host), "BASE_PACKAGES": "nginx-light"},
                          check=False)
    assert made.returncode == 0, made.stderr
    _without_images(docker_client)
    port = free_port()
    # What a user's .env would hold here: the two environments, and the offline build's
    # wheelhouse and stand-in base (no registry on this machine).
    project = Project({
        **engine_environ(docker_host), "TVMREPRO_SERVICE_IMAGE": SERVICE_IMAGE,
        "TVMREPRO_REDIS_IMAGE": REDIS_IMAGE, "TVMREPRO_POSTGRES_IMAGE": POSTGRES_IMAGE,
        "TVMREPRO_PORT": str(port), "DOCKER_SOCKET": docker_host.removeprefix("unix://"),
        "TVMREPRO_WORKER_ENVS": " ".join(f"--env {env_id}" for env_id in SERVED),
        "TVMREPRO_WHEELHOUSE_DIR": str(wheelhouse), "TVMREPRO_BASE_IMAGE": base_image,
        "TVMREPRO_FRONT_IMAGE": FRONT_IMAGE, "TVMREPRO_FRONT_BASE_IMAGE": FRONT_BASE_IMAGE,
        # One run at a time per worker: a job of SPREAD_RUNS must then reach every one of them.
        "TVMREPRO_WORKER_CONCURRENCY": "1"})
    project.environ["TVMREPRO_TEST_URL"] = f"http://127.0.0.1:{port}"
    built = project("build", "front")  # the project's own recipe, on the stand-in base
    assert built.returncode == 0, built.stdout + built.stderr
    try:
        yield project
    finally:
        logs = project("logs", "--no-color", "--tail", "60")
        print(logs.stdout[-8000:])
        project("down", "--volumes", "--timeout", "10")


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


def _environments(http: httpx.Client) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in http.get("/api/v1/environments").json()["environments"]}


def _up(project: Project, *args: str) -> httpx.Client:
    up = project("up", "-d", "--no-build", *args)
    assert up.returncode == 0, up.stderr
    http = httpx.Client(base_url=project.environ["TVMREPRO_TEST_URL"], timeout=30)
    _until(lambda: http.get("/healthz").json()["status"] == "ok", UP_TIMEOUT_S)
    return http


def _submit_while_building(http: httpx.Client) -> str:
    """The founding case, submitted as soon as the worker serves its environments (building)."""
    seen = _until(lambda: (envs := _environments(http)) and all(
        envs[env_id]["workers"] for env_id in SERVED) and envs, 60)
    building = {env_id: seen[env_id]["step"] for env_id in SERVED
                if seen[env_id]["state"] == "building"}
    assert NEW_ENV in building and building[NEW_ENV], seen  # its image: still being built
    case = load_case_file(case_path("tvm-17357/case.json")).model_dump(mode="json")
    posted = http.post("/api/v1/jobs", json={"kind": "run", "case": case,
                                             "environments": list(SERVED)})
    assert posted.status_code == 202, posted.text  # a building environment takes jobs
    job = posted.json()
    waiting = [r for r in job["runs"] if r["environment"] == NEW_ENV]
    assert waiting and all(r["state"] == "queued" for r in waiting)
    if _environments(http)[NEW_ENV]["state"] == "building":
        assert _environments(http)[NEW_ENV]["waiting"] == len(waiting)  # visibly waiting
    return str(job["id"])


def _finished(http: httpx.Client, job_id: str) -> dict[str, Any]:
    return dict(_until(lambda: (j := http.get(f"/api/v1/jobs/{job_id}").json())["status"]
                       in ("done", "failed") and j, BUILD_TIMEOUT_S))


def _check_founding_results(job: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    results = {(r["variant"], r["environment"]): r["result"] for r in job["runs"]}
    assert len(results) == 2 * len(SERVED)
    for (variant, _), result in results.items():
        expected = ("error", "vm_init") if variant == "fusetir-once" else ("ok", "vm_init")
        assert (result["status"], result["stage"]) == expected, result
        assert result["isolation"]["runtime"] == "docker"
    return results


@pytest.mark.docker
@pytest.mark.tvm
@pytest.mark.timeout(BUILD_TIMEOUT_S + 4 * UP_TIMEOUT_S)
def test_compose_up_alone_builds_the_images_serves_the_case_and_keeps_jobs(
        compose_stack: Project, docker_client: docker.DockerClient) -> None:
    catalog = default_catalog()
    assert [current_image(docker_client, catalog.get(e)) for e in SERVED] == [None] * len(SERVED)
    http = _up(compose_stack)
    assert http.get("/healthz").headers["server"] == "nginx"  # the front answers
    job_id = _submit_while_building(http)
    seen = siege(compose_stack.environ["TVMREPRO_TEST_URL"], 16, seconds=12.0)
    assert seen.bad == 0 and seen.reconnects >= 16, seen  # nginx closed each (10 s) and held on
    job = _finished(http, job_id)
    results = _check_founding_results(job)
    served = _environments(http)
    assert all(served[e]["state"] == "served" and served[e]["step"] is None for e in SERVED)
    assert served[NEW_ENV]["fingerprint"]["version"] == "0.27.0.post1"  # from the new image
    assert all(current_image(docker_client, catalog.get(e)) for e in SERVED)  # the worker's
    # Every run's container is gone; what is left waits, warm, for the next case.
    labels = [c["Labels"] for c in sandbox_containers(docker_client)]
    assert [lab for lab in labels if lab.get(JOB_LABEL) == job_id] == []
    assert all(lab.get(JOB_LABEL) == "warm" for lab in labels), labels

    down = compose_stack("down", "--timeout", "10")
    assert down.returncode == 0, down.stderr
    # A clean stop leaves no container of the worker's, not even a warm one waiting for a case
    # (the worker's are owned by processes of its own host: its container).
    here = f"{socket.gethostname()}:"
    assert [c["Labels"] for c in sandbox_containers(docker_client)
            if not c["Labels"].get(OWNER_LABEL, "").startswith(here)] == []
    http = _up(compose_stack)
    again = http.get(f"/api/v1/jobs/{job_id}")
    assert again.status_code == 200, again.text
    kept = {(r["variant"], r["environment"]): r["result"] for r in again.json()["runs"]}
    assert {k: v["status"] for k, v in kept.items()} == {k: v["status"]
                                                           for k, v in results.items()}

    # Scaled out with nothing else changed: three worker containers (hosts, each its own home)
    # share the broker and the store, and one job's runs spread over them.
    http = _up(compose_stack, "--scale", f"worker={SCALED_WORKERS}")
    _spread_over_the_workers(http)


def _workers_alive(http: httpx.Client) -> int:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("tvmrepro_workers_alive "):
            return int(float(line.split()[1]))
    return 0


def _spread_over_the_workers(http: httpx.Client) -> None:
    """A job of SPREAD_RUNS runs (bypassing the cache) is served by all SCALED_WORKERS hosts,
    which the metrics count."""
    _until(lambda: _workers_alive(http) == SCALED_WORKERS
           and _environments(http)[NEW_ENV]["workers"] == SCALED_WORKERS, UP_TIMEOUT_S)
    case = load_case_file(case_path("tvm-17357/case.json")).model_dump(mode="json")
    twice = next(v for v in case["variants"] if v["name"] == "fusetir-twice")
    case["variants"] = [{**twice, "name": f"twice-{n}"} for n in range(SPREAD_RUNS)]
    posted = http.post("/api/v1/jobs", json={"kind": "run", "case": case, "bypass_cache": True,
                                             "environments": [NEW_ENV]})
    assert posted.status_code == 202, posted.text
    job = _finished(http, posted.json()["id"])
    assert [r["result"]["status"] for r in job["runs"]] == ["ok"] * SPREAD_RUNS, job
    hosts = {r["host"] for r in job["runs"]}
    assert len(hosts) == SCALED_WORKERS and None not in hosts, hosts
