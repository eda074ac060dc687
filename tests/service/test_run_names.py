"""A run is named over HTTP as the command line names it: its id, or VARIANT@ENVIRONMENT."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.conftest import NEW_ENV, OLD_ENV
from tests.service.stack import api_in_thread
from tvmrepro.jobs.settling import finish_run
from tvmrepro.results import Log, PassRecord, Result, Status


def test_a_run_is_found_by_variant_at_environment(tmp_path: Path) -> None:
    with api_in_thread(tmp_path / "service") as (url, service):
        job = httpx.post(f"{url}/api/v1/jobs", json={
            "case": {"title": "names", "script": "print(1)\n"},
            "environments": [OLD_ENV, NEW_ENV], "wait": True}).json()
        for run in job["runs"]:
            finish_run(service.store, job["id"], run["id"], Result(
                environment=run["environment"], variant=run["variant"], status=Status.OK,
                stage="script", log=Log(stdout=f"printed on {run['environment']}\n"),
                passes=[PassRecord(index=0, name="FuseTIR", seconds=0.1, functions=[],
                                   ir=f"# {run['environment']}\n")]))
        runs = f"{url}/api/v1/jobs/{job['id']}/runs"
        by_id = {run["environment"]: run["id"] for run in job["runs"]}
        for env in (OLD_ENV, NEW_ENV):
            named = httpx.get(f"{runs}/script@{env}")
            assert named.status_code == 200, named.text
            assert named.json() == httpx.get(f"{runs}/{by_id[env]}").json()
            log = httpx.get(f"{runs}/script@{env}/log").json()
            assert log["stdout"] == f"printed on {env}\n"
            ir = httpx.get(f"{runs}/script@{env}/ir").json()
            assert ir["passes"][0]["ir"] == f"# {env}\n"
        compared = httpx.get(f"{url}/api/v1/jobs/{job['id']}/compare",
                             params={"a": f"script@{OLD_ENV}", "b": by_id[NEW_ENV]})
        assert compared.status_code == 200 and compared.json()["identical"] is False
        missing = httpx.get(f"{runs}/other@{NEW_ENV}")
        assert missing.status_code == 404 and f"other@{NEW_ENV}" in missing.json()["error"]["message"]
