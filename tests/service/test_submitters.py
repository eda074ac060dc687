"""What one request and one client may take of a shared service, through the API in process:
reports per triage (refused past the cap, before any is read), a large triage read a page at a
time, each submitter's budget of waiting runs and stored bytes (its own 429 first), and the
maintainer's token."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV
from tvmrepro.settings import MAX_TRIAGE_REPORTS, Settings

TOKEN = "a-maintainer-token-of-the-tests"
A, B = "203.0.113.1", "203.0.113.2"


def api(tmp_path: Path, **settings: str) -> Iterator[FlaskClient]:
    """A test client of an app on a fresh home, with these settings (and the maintainer's)."""
    app = create_app(Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                        "TVMREPRO_MAINTAINER_TOKEN": TOKEN, **settings}))
    yield app.test_client()
    service: JobService = app.extensions["tvmrepro"]
    service.store.dispose()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[FlaskClient]:
    yield from api(tmp_path)


def post(client: FlaskClient, body: dict[str, Any], address: str = A,
         token: str | None = None) -> tuple[int, dict[str, Any]]:
    """POST a job from a client at `address` (with the maintainer's token if given)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.post("/api/v1/jobs", data=json.dumps(body), headers=headers,
                           content_type="application/json",
                           environ_base={"REMOTE_ADDR": address})
    return response.status_code, response.get_json()


def words(count: int) -> dict[str, Any]:
    """A triage of `count` one-word reports (no code: no runs), as the attack sent them."""
    return {"kind": "triage", "environments": [NEW_ENV], "wait": True,
            "reports": [f"report{n}" for n in range(count)]}


def issues(count: int) -> dict[str, Any]:
    """A triage of `count` issues of one word each (no code), as an export gives them."""
    return {"kind": "triage", "environments": [NEW_ENV], "wait": True,
            "reports": [{"number": 10_000 + n, "title": f"report {n}", "state": "OPEN",
                         "body": "word"} for n in range(count)]}


def run_job(n: int, script: str = "print(1)\n") -> dict[str, Any]:
    """A run job of one run, waiting (no worker here)."""
    return {"case": {"title": f"job {n}", "script": f"# {n}\n{script}"},
            "environments": [NEW_ENV], "wait": True, "bypass_cache": True}


def test_a_triage_past_the_cap_is_refused_before_it_is_read(client: FlaskClient) -> None:
    started = time.monotonic()
    status, body = post(client, words(100_000))  # 1 MB: within the request's size
    took = time.monotonic() - started
    assert status == 400, body
    assert body["error"]["field"] == "reports"
    assert (f"at most {MAX_TRIAGE_REPORTS} reports (TVMREPRO_MAX_TRIAGE_REPORTS), got 100000"
            in body["error"]["message"])
    assert took < 5.0, took  # nothing imported, nothing stored
    assert client.get("/api/v1/jobs").get_json()["total"] == 0
    status, body = post(client, words(MAX_TRIAGE_REPORTS))
    assert status == 202, body


def first_page(client: FlaskClient, job_id: str) -> tuple[float, int, dict[str, Any]]:
    """How long the second read of a job's first screen took, its size and its JSON."""
    client.get(f"/api/v1/jobs/{job_id}")  # the first read makes the whole answer
    started = time.monotonic()
    response = client.get(f"/api/v1/jobs/{job_id}")
    return time.monotonic() - started, len(response.data), response.get_json()


def test_a_large_triage_is_read_a_page_at_a_time(tmp_path: Path) -> None:
    for client in api(tmp_path, TVMREPRO_MAX_TRIAGE_REPORTS="3000",
                      TVMREPRO_MAX_SUBMITTER_BYTES=str(1 << 30)):
        sizes = {}
        for count in (60, 3000):
            status, body = post(client, issues(count))
            assert status == 202, body
            took, sizes[count], job = first_page(client, body["id"])
            assert took < 1.0, (count, took)
            triage = job["triage"]
            assert triage["page"] == {"offset": 0, "limit": 50, "total": count,
                                      "next_offset": 50}
            assert len(triage["reports"]) == len(triage["titles"]) == len(triage["jobs"]) == 50
            assert triage["progress"]["reports"] == count and triage["finished"]
        # The first screen is as large at 3,000 reports as at 60: 50 reports and the summary.
        assert abs(sizes[3000] - sizes[60]) < 0.02 * sizes[60], sizes
        last = client.get(f"/api/v1/jobs/{body['id']}?offset=2990&limit=500").get_json()
        assert last["triage"]["page"] == {"offset": 2990, "limit": 500, "total": 3000,
                                          "next_offset": None}
        assert last["triage"]["titles"] == [f"report {n}" for n in range(2990, 3000)]
        whole = client.get(f"/api/v1/jobs/{body['id']}/report.md").get_data(as_text=True)
        assert "#12999" in whole  # the report is pasted whole


@pytest.mark.parametrize("query, field", [
    ("limit=0", "limit"), ("limit=501", "limit"), ("offset=-1", "offset"),
    ("offset=\u00b2", "offset"), ("limit=\u0663", "limit"), ("offset=1" + "0" * 20, "offset")])
def test_a_page_argument_is_ascii_digits_in_range(client: FlaskClient, query: str,
                                                  field: str) -> None:
    status, body = post(client, words(3))
    answer = client.get(f"/api/v1/jobs/{body['id']}?{query}")
    assert answer.status_code == 400, answer.get_data(as_text=True)
    assert answer.get_json()["error"]["field"] == field


def test_one_clients_load_is_refused_to_it_first(tmp_path: Path) -> None:
    for client in api(tmp_path, TVMREPRO_MAX_SUBMITTER_RUNS="2", TVMREPRO_MAX_QUEUED_RUNS="10"):
        assert [post(client, run_job(n))[0] for n in range(2)] == [202, 202]
        status, body = post(client, run_job(2))
        assert status == 429, body
        message = body["error"]["message"]
        assert f"submitter ip:{A} has 2 runs waiting for {NEW_ENV}" in message
        assert "TVMREPRO_MAX_SUBMITTER_RUNS" in message
        # Another client is admitted; the maintainer has no budget of its own (the queue's cap
        # holds for everyone).
        assert post(client, run_job(3), B)[0] == 202
        assert [post(client, run_job(n), A, TOKEN)[0] for n in range(4, 11)] == [202] * 7
        status, body = post(client, run_job(11), B)
        assert status == 429 and "(cap 10 per environment)" in body["error"]["message"]


def test_an_ipv6_client_is_its_64_block(tmp_path: Path) -> None:
    for client in api(tmp_path, TVMREPRO_MAX_SUBMITTER_RUNS="1"):
        assert post(client, run_job(0), "2001:db8:1:2::1")[0] == 202
        status, body = post(client, run_job(1), "2001:db8:1:2:ffff::7")
        assert status == 429 and "ip:2001:db8:1:2::/64" in body["error"]["message"], body
        assert post(client, run_job(2), "2001:db8:1:3::1")[0] == 202


def test_a_clients_stored_bytes_are_its_budget(tmp_path: Path) -> None:
    for client in api(tmp_path, TVMREPRO_MAX_SUBMITTER_BYTES="30000"):
        big = "x = '" + "y" * 12_000 + "'\n"
        assert [post(client, run_job(n, big))[0] for n in range(2)] == [202, 202]
        status, body = post(client, run_job(2, big))
        assert status == 429, body
        assert "TVMREPRO_MAX_SUBMITTER_BYTES" in body["error"]["message"]
        assert post(client, run_job(3, big), B)[0] == 202


def test_a_token_that_is_not_the_maintainers_is_refused(tmp_path: Path) -> None:
    for client in api(tmp_path):
        for header in (f"Bearer {TOKEN}x", "Bearer ", f"Basic {TOKEN}"):
            response = client.post("/api/v1/jobs", data=json.dumps(run_job(0)),
                                   content_type="application/json",
                                   headers={"Authorization": header})
            assert response.status_code == 403, header
            assert response.get_json()["error"]["field"] == "Authorization"
            assert TOKEN not in response.get_data(as_text=True)  # never echoed
    for client in api(tmp_path / "none", TVMREPRO_MAINTAINER_TOKEN=""):  # no token: nobody is
        assert post(client, run_job(0), token=TOKEN)[0] == 403


def test_a_sweep_runs_at_most_its_cap_of_stored_cases(tmp_path: Path) -> None:
    for client in api(tmp_path, TVMREPRO_MAX_SWEEP_CASES="2"):
        for n in range(3):
            assert post(client, run_job(n))[0] == 202
        sweep = {"kind": "sweep", "env": NEW_ENV, "since": OLD_ENV, "wait": True}
        status, first = post(client, sweep, token=TOKEN)
        assert status == 202, first
        assert first["title"].startswith("sweep of 2 stored cases (1-2 of 3)")
        assert first["sweep"]["progress"]["cases"] == 2 and first["sweep"]["next_offset"] == 2
        status, rest = post(client, {**sweep, "offset": 2}, token=TOKEN)
        assert status == 202, rest
        assert rest["sweep"]["progress"]["cases"] == 1 and rest["sweep"]["next_offset"] is None
        status, body = post(client, {**sweep, "offset": 3}, token=TOKEN)
        assert status == 400 and body["error"]["field"] == "offset", body
