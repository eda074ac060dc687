"""Bounds and parsing of the API (in process, no worker), on SQLite and on PostgreSQL with Redis.

Text made to cost: a NUL in any string, numbers written in other scripts' digits, issue numbers
no tracker has, a sweep of an environment against itself; 1 MiB of IR made to defeat difflib,
whose comparison is made once (by whoever stores the last run) and served from the store; a
stored timeout a sweep reads instead of spending its limit again; the messages of cancelled and
expired runs removed from the queues of environments no worker serves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV
from tests.fakes.runtime import FakeRuntime
from tests.fixtures.databases import REDIS_URL
from tests.fixtures.settle_tasks import take_settle_tasks
from tests.service.in_process import post
from tvmrepro.environments import default_catalog
from tvmrepro.jobs.settling import finish_run
from tvmrepro.queue import queue_name
from tvmrepro.results import Result, Status
from tvmrepro.settings import Settings
from worker.recovery import Sweeper

STORES = ("sqlite", "postgres")
CASE = {"title": "bounds", "source": "x = 1\n", "variants": [
    {"name": "once", "passes": ["FuseTIR"]}, {"name": "twice", "passes": ["FuseTIR", "FuseTIR"]}]}
FORGED_LINES = 40_000  # 1 MiB of IR whose every other line changed: minutes of difflib


@pytest.fixture(params=STORES)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Flask]:
    """The API on SQLite and the embedded broker, then on PostgreSQL and Redis; both
    environments' passes known (no TVM), a worker heartbeat for NEW_ENV only."""
    environ = {"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_WAIT_EXPIRY_S": "3600"}
    if request.param == "postgres":
        environ.update(DATABASE_URL=request.getfixturevalue("clean_postgres"),
                       REDIS_URL=REDIS_URL,
                       TVMREPRO_REDIS_PREFIX=request.getfixturevalue("redis_prefix"))
    settings = Settings.from_env(environ)
    made = create_app(settings)
    service: JobService = made.extensions["tvmrepro"]
    for env_id in (OLD_ENV, NEW_ENV):
        fake = FakeRuntime(settings)
        service.store.save_fingerprint(env_id, fake.fingerprint(default_catalog().get(env_id)))
    service.store.heartbeat("host:1:1.00", [NEW_ENV])
    made.config["store_kind"] = request.param
    yield made
    service.store.dispose()


def service_of(app: Flask) -> JobService:
    found: JobService = app.extensions["tvmrepro"]
    return found


def run_job(client: FlaskClient, case: dict[str, Any], envs: list[str]) -> dict[str, Any]:
    status, body = post(client, {"case": case, "environments": envs, "wait": True,
                                 "bypass_cache": True})
    assert status == 202, body
    return body


def test_a_nul_anywhere_is_400_and_nothing_is_stored(app: Flask) -> None:
    client = app.test_client()
    bodies = [({"case": {**CASE, "title": "a\x00b"}, "environments": [NEW_ENV]}, "case.title"),
              ({"kind": "triage", "environments": [NEW_ENV], "reports": [
                  {"body": "x", "title": "t"}, {"body": "y", "title": "bad \x00 title"}]},
               "reports[1].title"),
              ({"case": {**CASE, "variants": [{"name": "v\x00", "passes": []}]},
                "environments": [NEW_ENV]}, "case.variants[0].name"),
              ({"case": {**CASE, "k\x00": 1}, "environments": [NEW_ENV]}, "case.k\\x00")]
    for body, field in bodies:
        status, answer = post(client, body)
        assert status == 400, answer
        assert answer["error"]["field"] == field, answer
        assert "NUL" in answer["error"]["message"]
    assert client.get("/api/v1/jobs").get_json()["total"] == 0


@pytest.mark.parametrize(("path", "field"), [
    ("/api/v1/jobs?limit=²", "limit"), ("/api/v1/jobs?offset=①", "offset"),
    ("/api/v1/jobs?limit=٣", "limit"), ("/api/v1/jobs?limit=" + "9" * 40, "limit"),
    ("/api/v1/jobs/JOB?wait=²", "wait"), ("/api/v1/jobs/JOB?every=١", "every"),
    ("/api/v1/jobs/JOB?every=1e1", "every"), ("/api/v1/jobs/JOB?every=nan", "every"),
    ("/api/v1/jobs/JOB?every=1_0", "every"), ("/api/v1/jobs/JOB?every=.5", "every")])
def test_numbers_in_a_query_are_ascii_digits(app: Flask, path: str, field: str) -> None:
    client = app.test_client()
    job = run_job(client, CASE, [NEW_ENV])
    answer = client.get(path.replace("JOB", job["id"]))
    assert answer.status_code == 400, answer.text
    assert answer.get_json()["error"]["field"] == field
    assert client.get(f"/api/v1/jobs/{job['id']}?wait=0&every=0.5").status_code == 200


@pytest.mark.parametrize("number", [-1, 0, 10 ** 30, 10_000_001])
def test_an_issue_number_no_tracker_has_is_refused_at_submission(app: Flask, number: int) -> None:
    status, answer = post(app.test_client(), {"kind": "triage", "environments": [NEW_ENV],
                                              "reports": [{"body": "x", "number": number}]})
    assert status == 400, answer
    assert answer["error"]["field"] == "reports[0].number"


def test_a_sweep_of_an_environment_against_itself_is_400(app: Flask) -> None:
    status, answer = post(app.test_client(), {"kind": "sweep", "env": NEW_ENV, "since": NEW_ENV,
                                              "wait": True})
    assert status == 400, answer
    assert answer["error"]["field"] == "since"


def finish(service: JobService, job_id: str, run_id: str, result: Result) -> None:
    """What a worker does: claim the run, store its result (settling the job if it was last)."""
    service.store.claim(run_id, "test:1", 3, 5.0, lambda _claimer: False)
    assert finish_run(service.store, job_id, run_id, result)


def timed_out(env: str, variant: str) -> Result:
    return Result(environment=env, variant=variant, status=Status.TIMEOUT, stage="run",
                  signature="timeout", message="ran past its time limit of 120 s")


def test_a_sweep_reads_a_stored_timeout_instead_of_running_it_again(app: Flask) -> None:
    client, service = app.test_client(), service_of(app)
    stuck = run_job(client, {**CASE, "variants": CASE["variants"][:1]}, [OLD_ENV, NEW_ENV])
    for run in stuck["runs"]:  # both environments ran past the limit
        finish(service, stuck["id"], run["id"], timed_out(run["environment"], run["variant"]))
    status, sweep = post(client, {"kind": "sweep", "env": NEW_ENV, "since": OLD_ENV,
                                  "wait": True})
    assert status == 202, sweep
    parts = service.store.runs_of_jobs(service.store.triage_run_jobs(sweep["id"]))
    runs = [run for found in parts.values() for run in found]
    assert len(runs) == 2 and all(run.done and run.cached for run in runs), runs
    assert {(service.store.result(run.result_id or "") or {}).get("status")
            for run in runs} == {"timeout"}


def forged_ir(variant: str) -> str:
    lines = [f"  lv{i} = R.add(lv{i - 1}, x)\n" if i % 2 == 0 or variant == "once"
             else f"  lv{i} = R.multiply(x, x)\n" for i in range(FORGED_LINES)]
    return "".join(lines)


def with_ir(env: str, variant: str) -> Result:
    return Result.model_validate({
        "environment": env, "variant": variant, "status": "ok", "stage": "run",
        "passes": [{"index": 0, "name": "FuseTIR", "seconds": 0.0, "functions": [],
                    "ir": forged_ir(variant)}]})


def test_a_forged_ir_is_compared_once_and_served_from_the_store(app: Flask) -> None:
    client, service = app.test_client(), service_of(app)
    job = run_job(client, CASE, [NEW_ENV])
    once, twice = job["runs"]
    assert len(forged_ir("twice")) >= 1 << 20
    finish(service, job["id"], once["id"], with_ir(NEW_ENV, "once"))
    started = time.monotonic()
    finish(service, job["id"], twice["id"], with_ir(NEW_ENV, "twice"))  # settles it
    settled = time.monotonic() - started
    stored = service.store.job(job["id"])
    assert stored is not None and stored.comparisons is not None and settled < 30, settled
    for a, b in ((once, twice), (twice, once)):  # stored, then one no finisher made
        answer = client.get(f"/api/v1/jobs/{job['id']}/compare?a={a['id']}&b={b['id']}")
        assert answer.status_code == 200, answer.text[:200]
        found = answer.get_json()
        assert found["first_differing_pass"]["index"] == 0 and found["truncated"]
        assert found["diff"].startswith(f"--- {a['variant']}@{NEW_ENV} after pass 0")
    assert stored.comparisons[0].model_dump(mode="json") == client.get(
        f"/api/v1/jobs/{job['id']}/compare?a={once['id']}&b={twice['id']}").get_json()
    print(f"forged IR: settled in {settled:.2f} s, [{app.config['store_kind']}]")


def queued_messages(service: JobService, env: str) -> int:
    """Messages waiting in the environment's short lane (Redis: the list kombu keeps)."""
    settings = service.settings
    client = redis.Redis.from_url(settings.redis_url or "")
    try:
        return int(client.llen(f"{settings.redis_prefix}{queue_name(env)}"))
    finally:
        client.close()


def test_ended_runs_leave_the_queue_of_an_environment_no_worker_serves(app: Flask) -> None:
    if app.config["store_kind"] != "postgres":
        pytest.skip("the embedded broker's queues are the store's own tables")
    client, service = app.test_client(), service_of(app)
    cancelled = run_job(client, CASE, [OLD_ENV])  # OLD_ENV: no worker serves it
    expiring = run_job(client, {**CASE, "title": "expiring"}, [OLD_ENV])
    assert queued_messages(service, OLD_ENV) == 4
    answer = client.delete(f"/api/v1/jobs/{cancelled['id']}",
                           headers={"X-Cancel-Token": cancelled["cancel_token"]})
    assert answer.status_code == 200 and answer.get_json()["cancelled_runs"] == 2
    assert queued_messages(service, OLD_ENV) == 2
    with service.store.engine.begin() as conn:  # an hour and a bit later
        from tvmrepro.store import schema

        conn.execute(schema.runs.update().where(schema.runs.c.job_id == expiring["id"])
                     .values(created_at=schema.runs.c.created_at - 3700))
    sweeper = Sweeper(service.celery, service.settings, [NEW_ENV])
    started = time.monotonic()
    sweeper.tick()
    assert time.monotonic() - started < 5.0
    assert queued_messages(service, OLD_ENV) == 0
    assert take_settle_tasks(service.celery, service.store) == [expiring["id"]]
    sweeper.store.dispose()


FORGED_MESSAGE = ("Check failed: ( vs. " * 4000)[:64 << 10]  # cubic for a backtracking match


def failing(env: str, commit: str) -> Result:
    """A run whose message and log are 64 KiB made to make every pattern backtrack."""
    return Result.model_validate({
        "environment": env, "variant": "once", "status": "error", "stage": "build",
        "error_type": "InternalError", "message": FORGED_MESSAGE,
        "signature": "InternalError at X::Y", "signature_frame": "X::Y",
        "pass_path": ["FuseTIR"], "tvm": {"version": "0.27.0", "commit": commit},
        "log": {"stderr": (FORGED_MESSAGE + "\n") * 4}})


def test_a_forged_message_costs_a_bisection_its_suspects_never_its_step(
        app: Flask, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from tvmrepro.jobs.bisect import windows
    from tvmrepro.jobs.bisect.steps import after_run

    monkeypatch.delenv("TVMREPRO_TVM_HISTORY", raising=False)  # the shipped commit index
    windows._opened.cache_clear()
    client, service = app.test_client(), service_of(app)
    status, job = post(client, {"kind": "bisect", "case": CASE, "variant": "once",
                                "oracle": "regex:^Check failed",  # over the forged text too
                                "environments": [OLD_ENV, NEW_ENV], "wait": True,
                                "bypass_cache": True})
    assert status == 202, job
    good = Result(environment=OLD_ENV, variant="once", status=Status.OK, stage="run",
                  tvm={"version": "0.25.0", "commit": "gc7ba0735a"})
    for run in job["runs"]:
        service.store.claim(run["id"], "test:1", 3, 5.0, lambda _claimer: False)
        service.store.finish(run["id"], good if run["environment"] == OLD_ENV
                             else failing(NEW_ENV, "gfa3a688fb"))
    started = time.monotonic()
    after_run(service.store, lambda runs: None, job["id"])  # the worker's step
    took = time.monotonic() - started
    found = client.get(f"/api/v1/jobs/{job['id']}").get_json()["bisect"]
    assert found["finished"] and took < 30.0, (took, found)
    (change,) = found["transitions"]
    assert change["window"]["commits"] > 0 and change["suspects"] == []
    assert any("no suspects for" in record.message and "took longer than its budget"
               in record.message for record in caplog.records)  # the matcher's bound, not luck
    print(f"forged message: the step took {took:.2f} s [{app.config['store_kind']}]")


def test_the_sweep_hands_heavy_settling_to_a_pool_process(
        app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    from worker import recovery

    client, service = app.test_client(), service_of(app)
    job = run_job(client, CASE, [NEW_ENV])
    for run in job["runs"]:  # a finisher that died before it compared the forged IR
        service.store.claim(run["id"], "test:1", 3, 5.0, lambda _claimer: False)
        assert finish_run(service.store, job["id"], run["id"],
                          with_ir(NEW_ENV, run["variant"]), settle_job=False)
    monkeypatch.setattr(recovery, "FINISHER_GRACE_S", 0.0)
    sweeper = Sweeper(service.celery, service.settings, [NEW_ENV])
    for _ in range(2):  # asked once, however many sweeps see it before a worker takes it
        started = time.monotonic()
        sweeper.tick()  # its thread heartbeats: it diffs nothing
        assert time.monotonic() - started < 2.0
        assert service.store.unsettled_jobs(0.0, time.time() + 1) == [job["id"]]
    assert NEW_ENV in service.store.live_environments(service.settings.worker_stale_s)
    assert take_settle_tasks(service.celery, service.store) == [job["id"]]
    assert service.store.unsettled_jobs(0.0, time.time() + 1) == []
    sweeper.store.dispose()
