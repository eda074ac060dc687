"""The command line's client validates the service's answers with the shared API models."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask

from cli.client import ApiClient, Service, ServiceError
from cli.matrix_view import matrix_view, symbol_lines
from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV, case_path
from tests.fakes.runtime import FakeRuntime
from tvmrepro.api.requests import RunRequest
from tvmrepro.api.traced import SymbolEvent, SymbolTrace
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.report import render_report
from tvmrepro.lifecycle import JobStatus, RunState
from tvmrepro.settings import Settings

SERVER = "http://tvmrepro.test"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    """The real API on a fresh home, knowing the passes of the two environments (no TVM)."""
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                  "TVMREPRO_ALLOWED_HOSTS": "tvmrepro.test"})  # SERVER's name
    app = create_app(settings)
    service: JobService = app.extensions["tvmrepro"]
    for env_id in (OLD_ENV, NEW_ENV):
        fake = FakeRuntime(settings)
        service.store.save_fingerprint(env_id, fake.fingerprint(default_catalog().get(env_id)))
    yield app
    service.store.dispose()


def client_of(wsgi: Any) -> ApiClient:
    """An ApiClient talking to a WSGI app in this process."""
    client = ApiClient(SERVER, reconnect_s=0)
    client.http = httpx.Client(transport=httpx.WSGITransport(app=wsgi), base_url=SERVER)
    return client


def test_answers_are_the_shared_models(app: Flask) -> None:
    founding_case = json.loads(case_path("tvm-17357/case.json").read_text())
    client = client_of(app)
    job = client.submit(RunRequest(case=founding_case, environments=[OLD_ENV, NEW_ENV],
                                   wait=True))
    assert job.status is JobStatus.QUEUED and {r.state for r in job.runs} == {RunState.QUEUED}
    again = client.job(job.id)
    assert again.matrix.variants == ["fusetir-once", "fusetir-twice"] and again.runs == job.runs
    assert {env.id for env in client.environments()} >= {OLD_ENV, NEW_ENV}
    report = render_report(again)
    assert "| `fusetir-once` | queued | queued |" in report
    assert matrix_view(again).renderables  # the table renders from the model


def test_an_answer_of_another_shape_is_a_service_error_naming_the_field() -> None:
    def other_version(environ: dict[str, Any],
                      start: Callable[[str, list[tuple[str, str]]], Any]) -> Iterable[bytes]:
        """A service of another version: its job has no matrix and a status we do not know."""
        start("200 OK", [("Content-Type", "application/json")])
        job = {"id": "j", "kind": "run", "title": "", "status": "paused", "runs": []}
        return [json.dumps(job).encode()]

    with pytest.raises(ServiceError) as failed:
        client_of(other_version).job("j")
    assert "GET /api/v1/jobs/j is not a JobView" in str(failed.value)
    assert "status" in str(failed.value)


def test_the_matrix_tells_a_symbols_story_once_for_the_environments_that_share_it(
        app: Flask) -> None:
    founding_case = json.loads(case_path("tvm-17357/case.json").read_text())
    job = client_of(app).submit(RunRequest(case=founding_case, environments=[OLD_ENV, NEW_ENV],
                                           wait=True))
    lifted = SymbolEvent(step=2, pass_name="LambdaLift", event="appeared", name="f",
                         kind="Function")
    renamed = SymbolEvent(step=3, pass_name="AllocateWorkspace", event="renamed", name="f1",
                          previous="f")

    def traced(*stories: tuple[str, list[SymbolEvent]]) -> list[str]:
        symbols = [SymbolTrace(symbol="f", variant="fusetir-once", environment=env,
                               events=events, final_name=events[-1].name)
                   for env, events in stories]
        return symbol_lines(job.model_copy(update={"symbols": symbols}))

    assert traced((OLD_ENV, [lifted]), (NEW_ENV, [lifted])) == [
        "f in fusetir-once on every environment: appears after LambdaLift (pass 1) as Function"]
    assert traced((OLD_ENV, [lifted]), (NEW_ENV, [lifted, renamed])) == [
        f"f in fusetir-once on {OLD_ENV}: appears after LambdaLift (pass 1) as Function",
        f"f in fusetir-once on {NEW_ENV}: appears after LambdaLift (pass 1) as Function; "
        "renamed to f1 by AllocateWorkspace (pass 2)"]


def test_a_refusal_of_the_up_on_this_home_says_how_to_make_it_serve(app: Flask) -> None:
    case = json.loads(case_path("tvm-17357/case.json").read_text())
    client = client_of(app)
    client.service = Service(SERVER, "announced by the `tvmrepro up` on this TVMREPRO_HOME",
                             explicit=False, serves_provisioned=True)
    with pytest.raises(BadInput) as starting:  # its worker is still provisioning
        client.submit(RunRequest(case=case, environments="all"))
    assert str(starting.value) == (
        "environments: no worker is live yet: the worker of the `tvmrepro up` on this home "
        "provisions its environments first (a minute or two the first time), then serves "
        "them; try again then")
    with pytest.raises(BadInput) as unrelated:  # a refusal of something else stays as it was
        client.submit(RunRequest(case={**case, "target": 7}, environments="all"))
    assert "provision" not in str(unrelated.value)
    app.extensions["tvmrepro"].store.heartbeat("worker", [OLD_ENV])
    with pytest.raises(BadInput) as refused:
        client.submit(RunRequest(case=case, environments=[OLD_ENV, NEW_ENV]))
    assert f"or provision them here (tvmrepro env provision {NEW_ENV}): the `tvmrepro up` " \
           "on this home serves them within seconds" in str(refused.value)
    client.service = Service(SERVER, "given by --server")  # another service: no such advice
    with pytest.raises(BadInput) as elsewhere:
        client.submit(RunRequest(case=case, environments=[OLD_ENV, NEW_ENV]))
    assert "provision" not in str(elsewhere.value)
