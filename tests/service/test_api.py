"""The HTTP API in process (Flask's test client) on the embedded broker and SQLite: no worker."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV
from tests.service.in_process import SMALL_LIMIT, job, post
from tests.service.stack import free_port
from tvmrepro.jobs.settling import finish_run, settle_finished
from tvmrepro.queue import queue_length
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from tvmrepro.store import schema


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda b: b.update(environments=3), "environments"),
    (lambda b: b.update(environments=[OLD_ENV, "tvm-9.9-cpu"]), "environments[1]"),
    (lambda b: b.update(environments=[]), "environments"),
    (lambda b: b.update(environments=[None]), "environments[0]"),
    (lambda b: b.update(bypass_cache="yes"), "bypass_cache"),
    (lambda b: b.update(surprise=1), "surprise"),
    (lambda b: b.update(kind="bisect"), "variant"),  # two variants: a bisection names one
    (lambda b: b.update(kind="bisect", variant="fusetir-once", oracle="nope"), "oracle"),
    (lambda b: b.update(oracle="output"), "oracle"),  # a run job takes no bisect field
    (lambda b: b.update(kind="nonsense"), "kind"),
    (lambda b: b.update(variants=["no-such"]), "variants[0]"),
    (lambda b: b.update(case=[]), "case"),
    (lambda b: b["case"].pop("source"), "case"),
    (lambda b: b["case"].update(opt_level="high"), "case.opt_level"),
    (lambda b: b["case"]["variants"][0]["passes"].__setitem__(1, "LambdaLfit"),
     "case.variants[0].passes[1]"),
    (lambda b: b["case"]["variants"][0]["passes"].__setitem__(0, {"name": 7}),
     "case.variants[0].passes[0].name"),
])
def test_bad_input_is_400_naming_the_field(client: FlaskClient, founding_case: dict[str, Any],
                                           mutate: Any, field: str) -> None:
    body = job(json.loads(json.dumps(founding_case)))
    mutate(body)
    status, answer = post(client, body)
    assert status == 400, answer
    assert answer["error"]["field"] == field
    assert answer["error"]["message"].startswith(f"{field}: ")


@pytest.mark.parametrize(("raw", "field"), [
    ("{bad", "body"), ("", "body"), ("[]", "body"), ("null", "body"), ("\"text\"", "body"),
    ("{}", "case"), ("{\"case\": []}", "case"), ("{\"case\": {}}", "case"),
])
def test_not_a_job_is_400(client: FlaskClient, raw: str, field: str) -> None:
    # Not a JSON object: the body is wrong; an object without a usable case: the case is.
    status, answer = post(client, raw)
    assert status == 400, answer
    assert answer["error"]["field"] == field
    assert answer["error"]["message"].startswith(f"{field}: ")


def test_too_large_is_413(client: FlaskClient, founding_case: dict[str, Any]) -> None:
    big = {**founding_case, "title": "x" * SMALL_LIMIT}
    status, answer = post(client, job(big))
    assert status == 413 and str(SMALL_LIMIT) in answer["error"]["message"]


def test_all_without_a_live_worker_is_400(client: FlaskClient,
                                          founding_case: dict[str, Any]) -> None:
    status, answer = post(client, {"case": founding_case, "environments": "all"})
    assert status == 400 and answer["error"]["field"] == "environments"


def test_not_found_and_wrong_method_answer_json(client: FlaskClient) -> None:
    for path in ("/api/v1/jobs/nope", "/api/v1/jobs/nope/runs/x", "/api/v1/jobs/nope/runs/x/ir",
                 "/api/v1/jobs/nope/runs/x/log", "/api/v1/nothing-here"):
        response = client.get(path)
        assert response.status_code == 404 and response.get_json()["error"]["status"] == 404
    response = client.delete("/api/v1/jobs")
    assert response.status_code == 405 and response.get_json()["error"]["status"] == 405


def test_a_job_is_stored_and_its_runs_queued_per_environment(
        app: Flask, client: FlaskClient, founding_case: dict[str, Any]) -> None:
    status, answer = post(client, job(founding_case, variants=["fusetir-twice"]))
    assert status == 202 and answer["status"] == "queued"
    assert [(r["variant"], r["environment"], r["state"]) for r in answer["runs"]] == [
        ("fusetir-twice", OLD_ENV, "queued"), ("fusetir-twice", NEW_ENV, "queued")]
    assert answer["matrix"]["variants"] == ["fusetir-twice"]
    again = client.get(f"/api/v1/jobs/{answer['id']}").get_json()
    assert again["runs"] == answer["runs"] and again["case"]["source"] == founding_case["source"]
    service: JobService = app.extensions["tvmrepro"]
    assert [queue_length(service.celery, e) for e in (OLD_ENV, NEW_ENV)] == [1, 1]
    environments = client.get("/api/v1/environments").get_json()["environments"]
    waiting = {e["id"]: e["waiting"] for e in environments}
    assert waiting[OLD_ENV] == waiting[NEW_ENV] == 1
    compare = client.get(f"/api/v1/jobs/{answer['id']}/compare")
    assert compare.status_code == 400 and compare.get_json()["error"]["field"] == "a"


def test_an_environment_whose_image_is_being_built_takes_jobs_and_says_so(
        app: Flask, client: FlaskClient, founding_case: dict[str, Any]) -> None:
    service: JobService = app.extensions["tvmrepro"]
    service.store.heartbeat("host:1:1.00", [OLD_ENV, NEW_ENV], {NEW_ENV: "Step 6/18 : RUN pip"})
    status, answer = post(client, job(founding_case, variants=["fusetir-twice"], wait=False))
    assert status == 202, answer  # building counts as served: the runs wait for the image
    views = {e["id"]: e for e in client.get("/api/v1/environments").get_json()["environments"]}
    assert (views[NEW_ENV]["state"], views[NEW_ENV]["step"]) == ("building", "Step 6/18 : RUN pip")
    assert (views[OLD_ENV]["state"], views[OLD_ENV]["step"]) == ("served", None)
    assert views[NEW_ENV]["waiting"] == views[NEW_ENV]["workers"] == 1
    assert {v["state"] for k, v in views.items() if k not in (OLD_ENV, NEW_ENV)} == {"unserved"}
    assert client.get("/healthz").get_json()["unserved"] == []


def test_healthz(client: FlaskClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok", "store": "ok", "broker": "ok",
                                   "waiting_runs": 0, "unserved": []}


def test_healthz_says_when_the_broker_is_away(tmp_path: Path) -> None:
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    app = create_app(Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "REDIS_URL": nobody}))
    response = app.test_client().get("/healthz")  # how fast: bench/broker_away.py
    assert response.status_code == 503
    assert response.get_json()["broker"].startswith("unavailable")
    assert response.get_json()["store"] == "ok"


def test_openapi_covers_every_route(app: Flask, client: FlaskClient) -> None:
    document = client.get("/api/v1/openapi.json").get_json()
    schemas = document["components"]["schemas"]
    routes = {re.sub(r"<(\w+)>", r"{\1}", rule.rule) for rule in app.url_map.iter_rules()
              if rule.rule.startswith(("/api/v1", "/healthz", "/metrics"))}
    routes.discard("/api/v1/openapi.json")
    assert routes == set(document["paths"])
    refs = re.findall(r'"#/components/schemas/(\w+)"', json.dumps(document))
    assert refs and all(ref in schemas for ref in refs)
    # The request is the union of one model per kind, told apart by `kind`.
    union = schemas["JobRequest"]
    members = {kind: ref.rsplit("/", 1)[1]
               for kind, ref in union["discriminator"]["mapping"].items()}
    assert union["discriminator"]["propertyName"] == "kind"
    assert members == {"run": "RunRequest", "bisect": "BisectRequest", "reduce": "ReduceRequest",
                       "extract": "ExtractRequest", "triage": "TriageRequest",
                       "sweep": "SweepRequest"}
    assert [{"$ref": f"#/components/schemas/{name}"} for name in members.values()] == union["oneOf"]
    assert {"case", "environments", "bypass_cache", "variants"} <= set(
        schemas["RunRequest"]["properties"])
    assert "strategy" in schemas["BisectRequest"]["properties"]
    assert "strategy" not in schemas["RunRequest"]["properties"]
    assert schemas["BisectRequest"]["additionalProperties"] is False
    assert "variants" in schemas["Case"]["properties"]


def test_pass_names_are_checked_against_the_selected_environments_only(
        app: Flask, client: FlaskClient, founding_case: dict[str, Any]) -> None:
    service: JobService = app.extensions["tvmrepro"]
    other, unknown = "tvm-0.26.0-cpu", "tvm-0.27.0-cpu"  # one fingerprinted, one never served
    service.store.save_fingerprint(other, {"passes": ["FuseTIR", "OnlyInOther"]})
    case = json.loads(json.dumps(founding_case))
    case["variants"][0]["passes"][1] = "OnlyInOther"
    status, answer = post(client, {"case": case, "environments": [OLD_ENV, NEW_ENV]})
    assert status == 400 and answer["error"]["field"] == "case.variants[0].passes[1]"
    status, answer = post(client, {"case": case, "environments": [OLD_ENV, other], "wait": True})
    assert status == 202, answer
    status, answer = post(client, {"case": case, "environments": [OLD_ENV, unknown],
                                   "wait": True})
    assert status == 202, answer  # the unknown environment may have it: its run will say


def test_a_finished_job_shows_the_comparisons_stored_with_it(
        app: Flask, client: FlaskClient, founding_case: dict[str, Any]) -> None:
    _, answer = post(client, job(founding_case))
    service: JobService = app.extensions["tvmrepro"]
    for run in answer["runs"]:  # what a worker stores: each variant leaves its own IR
        service.store.claim(run["id"], "test:1", 3, 5.0, lambda _claimer: False)
        finish_run(service.store, answer["id"], run["id"], Result.model_validate({
            "environment": run["environment"], "variant": run["variant"], "status": "ok",
            "passes": [{"index": n, "name": f"P{n}", "seconds": 0.0, "functions": [], "ir": ir}
                       for n, ir in enumerate(["same", run["variant"]])]}))
    url = f"/api/v1/jobs/{answer['id']}"
    done = client.get(url).get_json()
    assert done["status"] == "done"
    assert [(c["a"]["environment"], c["first_differing_pass"]["index"])
            for c in done["matrix"]["comparisons"]] == [(OLD_ENV, 1), (NEW_ENV, 1)]
    # A GET reads what was stored, it does not diff again: change the store, the answer follows.
    with service.store.engine.begin() as conn:
        conn.execute(schema.comparisons.update().values(data={"comparisons": [], "symbols": []}))
    assert client.get(url).get_json()["matrix"]["comparisons"] == []
    # A job whose last finisher died before storing them reads without them, stored by the
    # recovery sweep (tvmrepro.jobs.settling.settle_finished), never by a read.
    with service.store.engine.begin() as conn:
        conn.execute(schema.comparisons.delete())
    assert client.get(url).get_json()["matrix"]["comparisons"] == []
    with service.store.engine.connect() as conn:
        assert conn.execute(schema.comparisons.select()).all() == []
    assert settle_finished(service.store, 0.0, time.time() + 1) == 1
    assert client.get(url).get_json()["matrix"]["comparisons"] == done["matrix"]["comparisons"]
    with service.store.engine.connect() as conn:
        assert len(conn.execute(schema.comparisons.select()).all()) == 1
