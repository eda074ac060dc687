"""One default set of releases (tvmrepro.choice) for the API, in process: a run or triage that
names no environments takes the newest release of each minor version (of them, those a live
worker serves) whatever else is served, says why, and names the releases it did not probe, in
its view and in the first lines of its report."""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from service.jobs import JobService
from tests.service.in_process import post
from tvmrepro.choice import DEFAULT_WHY, NAMED_WHY
from tvmrepro.environments import default_catalog

CASE = {"title": "default set", "script": "print('hello')\n"}
CPU = [env.id for env in default_catalog().environments if env.device == "cpu"]
DEFAULT = [env.id for env in default_catalog().spanning("cpu")]


def serve(app: Flask, envs: list[str]) -> None:
    """A live worker's heartbeat for these environments (no worker runs: the runs wait)."""
    service: JobService = app.extensions["tvmrepro"]
    service.store.heartbeat("host:1:1.00", envs)


def test_a_run_naming_no_environments_takes_the_default_set_though_all_are_served(
        app: Flask, client: FlaskClient) -> None:
    serve(app, CPU)  # every CPU release is served, as after provisioning them all here
    status, job = post(client, {"case": CASE})
    assert status == 202, job
    assert job["environments"] == DEFAULT and len(DEFAULT) < len(CPU)
    assert job["environments_why"] == DEFAULT_WHY
    assert job["not_probed"] == [env for env in CPU if env not in DEFAULT]
    assert {run["environment"] for run in job["runs"]} == set(DEFAULT)
    view = client.get(f"/api/v1/jobs/{job['id']}").get_json()
    assert (view["environments_why"], view["not_probed"]) == (DEFAULT_WHY, job["not_probed"])
    report = client.get(f"/api/v1/jobs/{job['id']}/report.md").get_data(as_text=True)
    said = report.splitlines()[2]  # after the conclusion: what it is over, and what it is not
    assert said.startswith(f"On {', '.join(f'`{e}`' for e in DEFAULT)} ({DEFAULT_WHY}); "
                           "not probed: `tvm-0.25.0rc0-cpu`, "), report[:600]
    assert said.endswith("`tvm-0.27.0-cpu`."), said
    # Named ones are what was named, and say so.
    status, named = post(client, {"case": CASE, "environments": CPU[:2]})
    assert (status, named["environments"], named["environments_why"]) == (202, CPU[:2],
                                                                          NAMED_WHY)


def test_a_default_release_no_worker_serves_is_left_out_and_named(
        app: Flask, client: FlaskClient) -> None:
    serve(app, [DEFAULT[-1], CPU[0]])
    status, job = post(client, {"case": CASE})
    assert status == 202, job
    assert job["environments"] == [DEFAULT[-1]]
    assert job["environments_why"] == (f"{DEFAULT_WHY} (no live worker serves "
                                       f"{', '.join(DEFAULT[:-1])}: left out)")
    # Asked to wait, the whole default set is queued.
    status, waiting = post(client, {"case": CASE, "wait": True})
    assert (status, waiting["environments"]) == (202, DEFAULT)
    serve(app, [CPU[0]])  # none of the default set served: refused, naming them
    status, refused = post(client, {"case": CASE})
    assert status == 409 and refused["error"]["field"] == "environments"
    assert all(env in refused["error"]["message"] for env in DEFAULT)


def test_a_triage_naming_no_environments_takes_the_default_set(
        app: Flask, client: FlaskClient) -> None:
    serve(app, CPU)
    body: dict[str, Any] = {"kind": "triage", "reports": [
        {"number": 1, "title": "t", "state": "OPEN", "url": "https://example.com/1",
         "body": "```python\nprint('hello')\n```\n"}]}
    status, job = post(client, body)
    assert status == 202, job
    assert job["environments"] == DEFAULT and job["triage"]["environments"] == DEFAULT
    assert job["triage"]["environments_why"] == DEFAULT_WHY
    assert job["triage"]["not_probed"] == [env for env in CPU if env not in DEFAULT]
    report = client.get(f"/api/v1/jobs/{job['id']}/report.md").get_data(as_text=True)
    assert "; not probed: `tvm-0.25.0rc0-cpu`, " in report.split("\n\n")[1], report[:800]


def test_the_environments_mark_the_default_set(client: FlaskClient) -> None:
    listed = client.get("/api/v1/environments").get_json()
    assert [env["id"] for env in listed["environments"] if env["default"]] == DEFAULT
    assert listed["default_why"] == DEFAULT_WHY
