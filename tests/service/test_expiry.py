"""Waiting runs expire by writers only (through the API in process, a real SQLite store): a GET
of a job whose run waited past TVMREPRO_WAIT_EXPIRY_S writes nothing and answers even from a
store that refuses every write; a worker's recovery sweep then ends the run Expired."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV
from tests.fixtures.settle_tasks import take_settle_tasks
from tests.service.in_process import post, writes_refused
from tvmrepro.settings import Settings
from tvmrepro.store import schema
from worker.recovery import Sweeper


def test_a_read_writes_nothing_and_the_sweep_expires_the_run(
        tmp_path: Path, founding_case: dict[str, Any]) -> None:
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                  "TVMREPRO_WAIT_EXPIRY_S": "3600"})
    app = create_app(settings)
    service: JobService = app.extensions["tvmrepro"]
    service.store.heartbeat("host:1:1.00", [NEW_ENV])  # OLD_ENV is served by no worker
    http = app.test_client()
    try:
        status, stuck = post(http, {"case": founding_case, "environments": [OLD_ENV],
                                    "bypass_cache": True, "wait": True})
        assert status == 202, stuck
        with service.store.engine.begin() as conn:  # an hour and a bit later
            conn.execute(schema.runs.update().where(schema.runs.c.job_id == stuck["id"])
                         .values(created_at=schema.runs.c.created_at - 3700))
        with writes_refused(service.store.engine) as attempted:
            answer = http.get(f"/api/v1/jobs/{stuck['id']}")
            listed = http.get("/api/v1/jobs")
        assert attempted == []
        assert answer.status_code == 200 and listed.status_code == 200, answer.text
        assert {run["state"] for run in answer.get_json()["runs"]} == {"queued"}
        Sweeper(service.celery, settings, [NEW_ENV]).tick()
        # The sweep ended the runs; the job it finished is settled by a pool process.
        assert take_settle_tasks(service.celery, service.store) == [stuck["id"]]
        expired = http.get(f"/api/v1/jobs/{stuck['id']}").get_json()
        assert expired["status"] == "failed"
        assert {(r["result"]["status"], r["result"]["error_type"]) for r in expired["runs"]} == {
            ("infra_error", "Expired")}
    finally:
        service.store.dispose()
