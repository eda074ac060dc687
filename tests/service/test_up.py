"""`tvmrepro up`: API and worker in one command, on the embedded broker and SQLite (no Redis)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import NEW_ENV, OLD_ENV, REPO, case_path
from tests.service.stack import free_port, make_home
from tvmrepro.environments import Environment
from tvmrepro.liveness import pid_alive
from tvmrepro.settings import Settings

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(300)]


def test_up_serves_and_runs_with_no_external_service(tmp_path: Path, test_home: Path,
                                                     tvm_envs: dict[str, Environment]) -> None:
    home, port = make_home(tmp_path, test_home), free_port()
    environ = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_URL", "DATABASE_URL") and not k.startswith("TVMREPRO_")}
    environ.update(TVMREPRO_HOME=str(home))
    tvmrepro = str(Path(sys.executable).parent / "tvmrepro")
    log = open(home / "up.log", "wb")  # noqa: SIM115  # the child writes to it
    up = subprocess.Popen([tvmrepro, "up", "--port", str(port), "--env", NEW_ENV], env=environ,
                          cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:  # until the API answers and the worker serves the environment
            try:
                envs = httpx.get(f"{url}/api/v1/environments").json()["environments"]
                if next(e for e in envs if e["id"] == NEW_ENV)["workers"] == 1:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (home / "up.log").read_text()[-3000:]
            time.sleep(0.3)
        # No --server: the client finds the `up` of its home (up.json), on whatever port it is.
        proc = subprocess.run([tvmrepro, "run", str(case_path("tvm-17357/case.json")), "--json"],
                              env=environ, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.startswith(f"service {url} (announced by the `tvmrepro up` on this "
                                      f"TVMREPRO_HOME ({home / 'up.json'})"), proc.stderr
        runs = json.loads(proc.stdout)["runs"]
        assert [(r["environment"], r["variant"], r["status"]) for r in runs] == [
            (NEW_ENV, "fusetir-once", "error"), (NEW_ENV, "fusetir-twice", "ok")]
        assert (home / "tvmrepro.sqlite").exists() and (home / "broker.sqlite").exists()
        assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
        worker_pid = _worker_pid(home)
        _check_run_local_takes_the_warm_sandboxes(tvmrepro, environ, url, runs)
        _check_extract_local_takes_the_warm_sandboxes(tvmrepro, environ, url)
        _check_an_api_process_exiting_keeps_the_announcement(up.pid, worker_pid, home)
    finally:
        os.kill(up.pid, signal.SIGTERM)
        up.wait(60)  # a clean stop, on a loaded machine
        log.close()
    assert not (home / "up.json").exists(), "the announcement outlived `tvmrepro up`"
    deadline = time.monotonic() + 30
    while pid_alive(worker_pid):  # the worker goes with it
        assert time.monotonic() < deadline, "the worker outlived `tvmrepro up`"
        time.sleep(0.2)


def _workers_of(url: str) -> dict[str, int]:
    """Environment id -> live workers serving it, as the API lists them ({} until it answers)."""
    try:
        envs = httpx.get(f"{url}/api/v1/environments").json()["environments"]
    except httpx.TransportError:
        return {}
    return {env["id"]: env["workers"] for env in envs}


def test_up_serves_an_environment_provisioned_after_it_started(
        tmp_path: Path, test_home: Path, settings: Settings,
        tvm_envs: dict[str, Environment]) -> None:
    # The home has one environment when `up` starts (the session's, linked: no build).
    home, port = tmp_path / "home", free_port()
    (home / "envs").mkdir(parents=True)
    (home / "envs" / OLD_ENV).symlink_to(test_home / "envs" / OLD_ENV)
    # The session's package cache: the provisioning below takes its wheels from there.
    environ = {**_service_environ(home), "TVMREPRO_PACKAGE_CACHE": str(settings.cache_dir),
               "TVMREPRO_RECONCILE_INTERVAL_S": "1", "TVMREPRO_WORKER_CONCURRENCY": "2"}
    tvmrepro = str(Path(sys.executable).parent / "tvmrepro")
    log = open(home / "up.log", "wb")  # noqa: SIM115  # the child writes to it
    up = subprocess.Popen([tvmrepro, "up", "--port", str(port), "--env", OLD_ENV,
                           "--also-provisioned"], env=environ, cwd=REPO, stdout=log,
                          stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _workers_of(url).get(OLD_ENV) == 1, 90, home, up)
        assert _workers_of(url)[NEW_ENV] == 0
        provisioned = subprocess.run([tvmrepro, "env", "provision", NEW_ENV], env=environ,
                                     capture_output=True, text=True, timeout=300)
        assert provisioned.returncode == 0, provisioned.stderr
        # No restart: the running worker takes the new environment's runs within seconds.
        _wait_for(lambda: _workers_of(url).get(NEW_ENV) == 1, 30, home, up)
        proc = subprocess.run([tvmrepro, "run", str(case_path("tvm-17357/case.json")),
                               "--env", NEW_ENV, "--variant", "fusetir-once", "--json"],
                              env=environ, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        runs = json.loads(proc.stdout)["runs"]
        assert [(r["environment"], r["status"], r["stage"]) for r in runs] == [
            (NEW_ENV, "error", "vm_init")], runs
        # `bisect --local` on this home hands its probes to that worker, which serves both.
        proc = subprocess.run([tvmrepro, "bisect", str(case_path("tvm-17357/case.json")),
                               "--local", "--env", OLD_ENV, "--env", NEW_ENV, "--variant",
                               "fusetir-once", "--json"],
                              env=environ, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"warm sandboxes of `tvmrepro up` at {url}" in proc.stderr
        probes = json.loads(proc.stdout)["probes"]
        assert [(p["environment"], p["verdict"]) for p in probes] == [
            (OLD_ENV, "bad"), (NEW_ENV, "bad")], probes
        _check_triage_local_takes_the_warm_sandboxes(tvmrepro, environ, url, tmp_path)
    finally:
        os.killpg(up.pid, signal.SIGTERM)
        up.wait(60)  # a clean stop, on a loaded machine
        log.close()


def _wait_for(condition: Callable[[], bool], seconds: float, home: Path,
              up: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert up.poll() is None and time.monotonic() < deadline, \
            (home / "up.log").read_text()[-3000:]
        time.sleep(0.3)


def _check_triage_local_takes_the_warm_sandboxes(tvmrepro: str, environ: dict[str, str],
                                                 url: str, tmp_path: Path) -> None:
    """`triage --local` on the home of a live `up` that serves its environments is a triage
    job there, with the answer a triage here gives (tests/tracker/test_triage.py)."""
    issues = json.loads((REPO / "tests" / "tracker" / "corpus" / "issues.json").read_text())
    four = tmp_path / "four.json"
    four.write_text(json.dumps([i for i in issues if i["number"] in (17348, 20191, 20200, 17239)]))
    proc = subprocess.run([tvmrepro, "triage", str(four), "--local", "--env", OLD_ENV, "--env",
                           NEW_ENV, "--json"], env=environ, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert f"warm sandboxes of `tvmrepro up` at {url}" in proc.stderr
    verdicts = {r["number"]: r["verdict"] for r in json.loads(proc.stdout)["reports"]}
    assert verdicts == {17348: "reproduces", 20191: "reproduces", 20200: "fixed",
                        17239: "never_reproduced"}, verdicts
    newest = httpx.get(f"{url}/api/v1/jobs", params={"limit": 1}).json()["jobs"][0]
    assert newest["kind"] == "triage", newest


def _check_extract_local_takes_the_warm_sandboxes(tvmrepro: str, environ: dict[str, str],
                                                  url: str) -> None:
    """`extract --local` on the home of a live `up` that serves its environment is a job there;
    with --cold it runs here (no job there)."""
    def jobs() -> int:
        return int(httpx.get(f"{url}/api/v1/jobs").json()["total"])

    before = jobs()
    script = str(case_path("tvm-17357/original.py"))
    proc = subprocess.run([tvmrepro, "extract", script, "--local", "--env", NEW_ENV, "--json"],
                          env=environ, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"warm sandboxes of `tvmrepro up` at {url}" in proc.stderr
    assert json.loads(proc.stdout)["reproduces"] is True
    assert jobs() == before + 1


def _check_run_local_takes_the_warm_sandboxes(tvmrepro: str, environ: dict[str, str], url: str,
                                              service_runs: list[dict[str, object]]) -> None:
    """`run --local` on the home of a live `up` runs on its worker (a new job there, the cache
    bypassed, the same answers); with --cold it starts its own sandbox (no job there)."""
    case = str(case_path("tvm-17357/case.json"))

    def jobs() -> int:
        return int(httpx.get(f"{url}/api/v1/jobs").json()["total"])

    before = jobs()
    proc = subprocess.run([tvmrepro, "run", "--local", "--env", NEW_ENV, case, "--json"],
                          env=environ, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"warm sandboxes of `tvmrepro up` at {url}" in proc.stderr
    warm = json.loads(proc.stdout)["runs"]
    assert jobs() == before + 1
    newest = httpx.get(f"{url}/api/v1/jobs", params={"limit": 1}).json()["jobs"][0]["id"]
    assert [run["cached"] for run in httpx.get(f"{url}/api/v1/jobs/{newest}").json()["runs"]] == [
        False, False]  # run again although the same case's results are stored
    assert [(r["variant"], r["status"], r["signature"]) for r in warm] == [
        (r["variant"], r["status"], r["signature"]) for r in service_runs]

    proc = subprocess.run([tvmrepro, "run", "--local", "--cold", "--env", NEW_ENV, case,
                           "--variant", "fusetir-once", "--json"],
                          env=environ, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "warm sandboxes" not in proc.stderr and jobs() == before + 1
    assert json.loads(proc.stdout)["runs"][0]["signature"] == warm[0]["signature"]


def _check_an_api_process_exiting_keeps_the_announcement(up_pid: int, worker_pid: int,
                                                home: Path) -> None:
    """gunicorn forks the API's processes from `up`; one that exits (a graceful restart) unwinds
    through `up`'s code: the announcement must stay."""
    api = next(p for p in psutil.Process(up_pid).children() if p.pid != worker_pid)
    api.terminate()
    api.wait(30)
    assert (home / "up.json").exists(), "an API process removed the announcement"


def _worker_pid(home: Path) -> int:
    """The pid of the worker's main process, from its heartbeat (its liveness token)."""
    from tvmrepro.store import Store

    store = Store(f"sqlite:///{home / 'tvmrepro.sqlite'}")
    with store.engine.connect() as conn:
        from tvmrepro.store import schema

        (worker_id,) = conn.execute(schema.workers.select().with_only_columns(
            schema.workers.c.id)).scalars()
    store.dispose()
    return int(worker_id.split(":")[1])


def _service_environ(home: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_URL", "DATABASE_URL") and not k.startswith("TVMREPRO_")}
    environ.update(TVMREPRO_HOME=str(home))
    return environ


@pytest.mark.timeout(120)
def test_serve_makes_a_home_that_does_not_exist(tmp_path: Path) -> None:
    home, port = tmp_path / "not" / "yet" / "home", free_port()
    tvmrepro = str(Path(sys.executable).parent / "tvmrepro")
    api = subprocess.Popen([tvmrepro, "serve", "--port", str(port)], env=_service_environ(home),
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz")
                break
            except httpx.TransportError:
                assert api.poll() is None, api.communicate()[0].decode()[-3000:]
                assert time.monotonic() < deadline, "the API never answered"
                time.sleep(0.3)
        assert health.status_code == 200, health.text
        assert (home / "tvmrepro.sqlite").is_file()
    finally:
        os.killpg(api.pid, signal.SIGTERM)
        api.wait(30)


@pytest.mark.parametrize("command", [["serve"], ["up"], ["worker", "--env", NEW_ENV]])
def test_an_uncreatable_home_is_one_line_naming_it(tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    home = blocker / "home"
    tvmrepro = str(Path(sys.executable).parent / "tvmrepro")
    proc = subprocess.run([tvmrepro, *command], env=_service_environ(home), cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(home) in lines[0] and "Traceback" not in proc.stderr, proc.stderr
