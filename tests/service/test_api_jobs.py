"""The job list (paged, newest first) and cancelling a job, through the API in process."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV
from tests.service.in_process import post
from tvmrepro.settings import Settings
from tvmrepro.store import schema


def _submit(client: FlaskClient, case: dict[str, Any], title: str) -> str:  # noqa: F811
    status, body = post(client, {"case": {**case, "title": title}, "environments": [NEW_ENV],
                                 "bypass_cache": True, "wait": True})
    assert status == 202, body
    return str(body["id"])


def test_jobs_are_listed_newest_first_a_page_at_a_time(
        client: FlaskClient, founding_case: dict[str, Any]) -> None:  # noqa: F811
    ids = [_submit(client, founding_case, f"job {n}") for n in range(3)]
    first = client.get("/api/v1/jobs?limit=2").get_json()
    assert [j["id"] for j in first["jobs"]] == ids[::-1][:2]
    assert first["total"] == 3 and first["next_offset"] == 2
    assert first["jobs"][0] | {"created_at": None} == {
        "id": ids[2], "kind": "run", "title": "job 2", "created_at": None, "runs": 2, "done": 0}
    last = client.get(f"/api/v1/jobs?limit=2&offset={first['next_offset']}").get_json()
    assert [j["id"] for j in last["jobs"]] == ids[:1] and last["next_offset"] is None
    bad = client.get("/api/v1/jobs?limit=0")
    assert bad.status_code == 400 and bad.get_json()["error"]["field"] == "limit"


def test_cancel_ends_the_waiting_runs_and_nothing_else(
        client: FlaskClient, founding_case: dict[str, Any]) -> None:  # noqa: F811
    keep, drop = (_submit_with_token(client, founding_case, t) for t in ("keep", "drop"))
    answer = client.delete(f"/api/v1/jobs/{drop[0]}", headers={"X-Cancel-Token": drop[1]})
    assert answer.status_code == 200 and answer.get_json() == {"id": drop[0], "cancelled_runs": 2}
    job = client.get(f"/api/v1/jobs/{drop[0]}").get_json()
    assert job["status"] == "failed"
    assert {(r["state"], r["result"]["error_type"]) for r in job["runs"]} == {("done", "Cancelled")}
    again = client.delete(f"/api/v1/jobs/{drop[0]}", headers={"X-Cancel-Token": drop[1]})
    assert again.get_json()["cancelled_runs"] == 0  # idempotent
    assert {r["state"] for r in client.get(f"/api/v1/jobs/{keep[0]}").get_json()["runs"]} == {
        "queued"}
    assert client.delete("/api/v1/jobs/nope", headers={"X-Cancel-Token": "x"}).status_code == 404


def _submit_with_token(client: FlaskClient, case: dict[str, Any],  # noqa: F811
                       title: str) -> tuple[str, str]:
    status, body = post(client, {"case": {**case, "title": title}, "environments": [NEW_ENV],
                                 "bypass_cache": True, "wait": True})
    assert status == 202, body
    return str(body["id"]), str(body["cancel_token"])


def test_only_the_submitter_cancels(app: Flask, client: FlaskClient,  # noqa: F811
                                    founding_case: dict[str, Any]) -> None:
    mine, token = _submit_with_token(client, founding_case, "mine")
    theirs, other = _submit_with_token(client, founding_case, "theirs")
    assert len(token) >= 32 and token != other
    # The token is given once: a reader of the job (or of the list) never sees it.
    assert client.get(f"/api/v1/jobs/{mine}").get_json()["cancel_token"] is None
    assert token not in client.get("/api/v1/jobs").get_data(as_text=True)
    service: JobService = app.extensions["tvmrepro"]
    assert service.store.cancel_digest(mine) == hashlib.sha256(token.encode()).hexdigest()
    for headers, problem in (({}, "needs its cancel token"),
                             ({"X-Cancel-Token": ""}, "needs its cancel token"),
                             ({"X-Cancel-Token": other}, "is not job"),
                             ({"X-Cancel-Token": token + "x"}, "is not job")):
        refused = client.delete(f"/api/v1/jobs/{mine}", headers=headers)
        assert refused.status_code == 403, (headers, refused.get_json())
        error = refused.get_json()["error"]
        assert error["field"] == "X-Cancel-Token" and problem in error["message"], error
    assert {r["state"] for r in client.get(f"/api/v1/jobs/{mine}").get_json()["runs"]} == {
        "queued"}  # nothing cancelled
    done = client.delete(f"/api/v1/jobs/{theirs}", headers={"X-Cancel-Token": other})
    assert done.status_code == 200 and done.get_json()["cancelled_runs"] == 2
    # A job stored before cancel tokens has none: no token cancels it.
    with service.store.engine.begin() as conn:
        conn.execute(schema.jobs.update().where(schema.jobs.c.id == mine)
                     .values(cancel_digest=None))
    refused = client.delete(f"/api/v1/jobs/{mine}", headers={"X-Cancel-Token": token})
    assert refused.status_code == 403
    delete = client.get("/api/v1/openapi.json").get_json()["paths"]["/api/v1/jobs/{job_id}"][
        "delete"]
    assert "403" in delete["responses"] and {"name": "X-Cancel-Token", "in": "header"}.items() \
        <= delete["parameters"][-1].items()


def test_the_queue_cap_is_per_environment_and_waiting_runs_expire(
        tmp_path: Path, founding_case: dict[str, Any]) -> None:
    # 2 runs at most per environment's queue: a job waiting for an environment no worker
    # serves fills that environment's queue only, and only until it expires.
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_MAX_QUEUED_RUNS": "2",
                                  "TVMREPRO_WAIT_EXPIRY_S": "3600"})
    capped = create_app(settings)
    service: JobService = capped.extensions["tvmrepro"]
    service.store.heartbeat("host:1:1.00", [NEW_ENV])  # NEW_ENV is served, OLD_ENV is not
    http = capped.test_client()
    try:
        def submit(env_id: str, title: str) -> tuple[int, dict[str, Any]]:
            return post(http, {"case": {**founding_case, "title": title},
                               "environments": [env_id], "bypass_cache": True, "wait": True})

        status, stuck = submit(OLD_ENV, "waits for a worker that never comes")
        assert status == 202, stuck
        status, full = submit(OLD_ENV, "no room")
        assert status == 429, full
        assert full["error"]["message"] == (f"the queue of {OLD_ENV} holds 2 waiting runs "
                                            "(cap 2 per environment); retry later")
        status, served = submit(NEW_ENV, "another environment's queue has room")
        assert status == 202, served
        # An hour and a bit later: the next submission expires the stuck runs, which say why
        # and make room (a read does not: tests/service/test_expiry.py).
        with service.store.engine.begin() as conn:
            conn.execute(schema.runs.update().where(schema.runs.c.job_id == stuck["id"])
                         .values(created_at=schema.runs.c.created_at - 3700))
        status, later = submit(OLD_ENV, "room again")
        assert status == 202, later
        expired = http.get(f"/api/v1/jobs/{stuck['id']}").get_json()
        assert expired["status"] == "failed"
        assert {(r["result"]["status"], r["result"]["error_type"]) for r in expired["runs"]} == {
            ("infra_error", "Expired")}
        message = expired["runs"][0]["result"]["message"]
        assert message == (f"no worker took it within 3600 s (TVMREPRO_WAIT_EXPIRY_S); submit "
                           f"it again when a worker serves {OLD_ENV}")
        assert {r["state"] for r in http.get(f"/api/v1/jobs/{served['id']}").get_json()[
            "runs"]} == {"queued"}  # a fresh run does not expire
    finally:
        service.store.dispose()


def test_a_job_for_an_environment_no_worker_serves_is_409_unless_it_waits(
        client: FlaskClient, founding_case: dict[str, Any]) -> None:  # noqa: F811
    before = client.get("/api/v1/jobs").get_json()["total"]
    status, body = post(client, {"case": founding_case, "environments": [NEW_ENV]})
    assert status == 409 and body["error"]["field"] == "environments[0]"
    assert f"no live worker serves {NEW_ENV}" in body["error"]["message"]
    assert client.get("/api/v1/jobs").get_json()["total"] == before  # nothing stored
    assert client.get("/healthz").get_json()["unserved"] == []
    _submit(client, founding_case, "queued on purpose")
    health = client.get("/healthz").get_json()
    assert health["status"] == "ok" and health["unserved"] == [NEW_ENV]
