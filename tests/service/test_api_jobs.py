"""The job list (paged, newest first) and cancelling a job, through the API in process."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

from tests.conftest import NEW_ENV
from tests.service.test_api import app, client, post  # noqa: F401  # fixtures


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
    keep, drop = (_submit(client, founding_case, t) for t in ("keep", "drop"))
    answer = client.delete(f"/api/v1/jobs/{drop}")
    assert answer.status_code == 200 and answer.get_json() == {"id": drop, "cancelled_runs": 2}
    job = client.get(f"/api/v1/jobs/{drop}").get_json()
    assert job["status"] == "failed"
    assert {(r["state"], r["result"]["error_type"]) for r in job["runs"]} == {("done", "Cancelled")}
    assert client.delete(f"/api/v1/jobs/{drop}").get_json()["cancelled_runs"] == 0  # idempotent
    assert {r["state"] for r in client.get(f"/api/v1/jobs/{keep}").get_json()["runs"]} == {"queued"}
    assert client.delete("/api/v1/jobs/nope").status_code == 404


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
