"""No GET writes to the store: a job of every kind, each left as a finisher that died leaves it
(a run job finished without its comparisons, a bisection with a probe no step saw, a run that
waited past TVMREPRO_WAIT_EXPIRY_S), read through every GET of the API and the pages (in process,
a real SQLite store) while the store refuses every write: each answers as it does on a store
that takes writes, and nothing was attempted. What is left is settled by writers only (the
recovery sweep: tests/service/test_expiry.py, tests/service/test_api.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV
from tests.fakes.runtime import FakeRuntime
from tests.fixtures.settle_tasks import take_settle_tasks
from tests.service.in_process import post, writes_refused
from tvmrepro.environments import default_catalog
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from tvmrepro.store import schema
from worker import recovery
from worker.recovery import Sweeper

SCRIPT = "import tvm\nraise ValueError('a bug reported once as #99999')\n"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    """An app on a fresh home that knows both environments' passes and has a live worker
    for NEW_ENV only (OLD_ENV's runs wait)."""
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                  "TVMREPRO_WAIT_EXPIRY_S": "3600"})
    app = create_app(settings)
    service: JobService = app.extensions["tvmrepro"]
    for env_id in (OLD_ENV, NEW_ENV):
        fake = FakeRuntime(settings)
        service.store.save_fingerprint(env_id, fake.fingerprint(default_catalog().get(env_id)))
    service.store.heartbeat("host:1:1.00", [NEW_ENV])
    yield app
    service.store.dispose()


def stored_by_a_dead_finisher(service: JobService, job_id: str, count: int) -> None:
    """The first `count` runs of a job finished with the store's own `finish` and nothing
    after it: no comparisons, no bisection step (what a worker killed then leaves)."""
    job = service.store.job(job_id)
    assert job is not None
    for run in job.runs[:count]:
        service.store.claim(run.id, "host:1:1.00", 3, 5.0, lambda _claimer: False)
        assert service.store.finish(run.id, Result.model_validate({
            "environment": run.environment, "variant": run.variant, "status": "error",
            "stage": "build", "error_type": "ValueError", "message": "a bug",
            "signature": "ValueError: a bug", "log": {"stdout": "out", "stderr": "err"},
            "passes": [{"index": n, "name": f"P{n}", "seconds": 0.0, "functions": [],
                        "ir": f"{ir}\n"} for n, ir in enumerate(["same", run.variant])]}))


def jobs_of_every_kind(client: FlaskClient, service: JobService,
                       founding_case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One job of each kind, submitted through the API, each left as described above."""
    script_case = {"title": "a script", "script": SCRIPT}
    bodies: dict[str, dict[str, Any]] = {
        "run": {"case": founding_case, "environments": [OLD_ENV, NEW_ENV]},
        "bisect": {"kind": "bisect", "case": founding_case, "variant": "fusetir-twice",
                   "environments": [OLD_ENV, NEW_ENV], "bypass_cache": True},
        "reduce": {"kind": "reduce", "case": founding_case, "variant": "fusetir-twice",
                   "environments": [NEW_ENV]},
        "extract": {"kind": "extract", "case": script_case, "environments": [OLD_ENV]},
        "triage": {"kind": "triage", "environments": [NEW_ENV], "reports": [
            {"number": 99999, "title": "a bug", "state": "OPEN",
             "body": f"### Steps\n\n```python\n{SCRIPT}```\n"}]},
        "sweep": {"kind": "sweep", "env": NEW_ENV, "since": OLD_ENV},
    }
    jobs = {}
    for kind, body in bodies.items():
        status, answer = post(client, {**body, "wait": True})
        assert status == 202, (kind, answer)
        jobs[kind] = answer
    stored_by_a_dead_finisher(service, jobs["run"]["id"], 4)
    stored_by_a_dead_finisher(service, jobs["bisect"]["id"], 1)
    with service.store.engine.begin() as conn:  # the extract job's run waited an hour and more
        conn.execute(schema.runs.update()
                     .where(schema.runs.c.job_id == jobs["extract"]["id"])
                     .values(created_at=schema.runs.c.created_at - 3700))
    return jobs


def urls(jobs: dict[str, dict[str, Any]], service: JobService) -> list[str]:
    """Every GET of the API and the pages, on each of these jobs and each of their runs."""
    found = ["/api/v1/jobs", "/api/v1/environments", "/api/v1/openapi.json", "/healthz",
             "/api/v1/passes", "/"]
    for answer in jobs.values():
        job_id = answer["id"]
        found += [f"/api/v1/jobs/{job_id}", f"/api/v1/jobs/{job_id}/report.md",
                  f"/jobs/{job_id}"]
        job = service.store.job(job_id)
        assert job is not None
        done = [run.id for run in job.runs if run.done]
        for run_id in done:
            found += [f"/api/v1/jobs/{job_id}/runs/{run_id}{part}"
                      for part in ("", "/log", "/ir")]
        if len(done) > 1:
            found.append(f"/api/v1/jobs/{job_id}/compare?a={done[0]}&b={done[1]}")
    return found


def test_no_get_writes_to_the_store(app: Flask, founding_case: dict[str, Any]) -> None:
    service: JobService = app.extensions["tvmrepro"]
    client = app.test_client()
    jobs = jobs_of_every_kind(client, service, founding_case)
    assert set(jobs) == set(KINDS)
    # Left as described: each would be written on a read that settled it.
    now = time.time()
    assert jobs["run"]["id"] in service.store.unsettled_jobs(0.0, now + 1)
    assert service.store.stalled_bisections(now + 1) == [jobs["bisect"]["id"]]
    assert [run.job_id for run in service.store.waiting_since(now - 3600)] == [
        jobs["extract"]["id"]]
    with writes_refused(service.store.engine) as attempted:
        refused = {url: client.get(url) for url in urls(jobs, service)}
    assert attempted == []
    for url, answer in refused.items():
        assert answer.status_code == 200, (url, answer.text)
        taken = client.get(url)  # the same read, on a store that takes writes
        assert (taken.status_code, taken.text) == (200, answer.text), url
    with service.store.engine.connect() as conn:  # still left for the sweep
        assert conn.execute(sa.select(schema.comparisons.c.job_id)
                            .where(schema.comparisons.c.job_id == jobs["run"]["id"])
                            ).first() is None


def test_the_recovery_sweep_settles_what_a_dead_finisher_left(
        app: Flask, founding_case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    service: JobService = app.extensions["tvmrepro"]
    client = app.test_client()
    jobs = jobs_of_every_kind(client, service, founding_case)
    run_job, bisect_job = jobs["run"]["id"], jobs["bisect"]["id"]
    before = client.get(f"/api/v1/jobs/{bisect_job}").get_json()
    sweeper = Sweeper(service.celery, service.settings, [NEW_ENV])
    sweeper.settle_left()  # finished just now: its finisher may still be at it
    assert service.store.unsettled_jobs(0.0, time.time() + 1) == [run_job]
    # Every run stored, its comparisons not: not yet done (a client stops polling at done).
    unsettled = client.get(f"/api/v1/jobs/{run_job}").get_json()
    assert {run["state"] for run in unsettled["runs"]} == {"done"}
    assert unsettled["status"] == "running"
    assert take_settle_tasks(service.celery, service.store) == []
    monkeypatch.setattr(recovery, "FINISHER_GRACE_S", 0.0)  # as if the grace had passed
    sweeper.settle_left()
    # The sweep only published them (its thread heartbeats): a pool process settles them.
    assert service.store.unsettled_jobs(0.0, time.time() + 1) == [run_job]
    sweeper.settle_left()  # asked once: not published again while it waits for a worker
    assert take_settle_tasks(service.celery, service.store) == [run_job, bisect_job]
    assert service.store.unsettled_jobs(0.0, time.time() + 1) == []
    assert service.store.stalled_bisections(time.time() + 1) == []
    settled = client.get(f"/api/v1/jobs/{run_job}").get_json()
    assert settled["status"] == "done"
    assert [c["first_differing_pass"]["index"] for c in settled["matrix"]["comparisons"]] == [1, 1]
    after = client.get(f"/api/v1/jobs/{bisect_job}").get_json()
    assert after["bisect"]["progress"]["done"] == before["bisect"]["progress"]["done"] + 1
