"""A case's files over the API (in process, a real store; no worker): what is refused, naming the
field; a case with the most files the caps allow is admitted under the default request cap; a
file two jobs attach is stored once; the same files are a cache hit, other content is not."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from cli.commands.tracker import reports_json
from service.jobs import JobService
from tests.conftest import NEW_ENV
from tests.service.conftest import app_knowing_both
from tests.service.in_process import job, post
from tvmrepro.jobs.settling import finish_run
from tvmrepro.jobs.tracker.importing import import_file
from tvmrepro.results import Result
from tvmrepro.settings import MAX_FILE_BYTES, MAX_FILES, MAX_REQUEST_BYTES, Settings

SCRIPT = "import numpy as np\nprint(np.load('x.npy').sum())\n"


@pytest.fixture(params=("sqlite", "postgres"))
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Flask]:
    """An app with the default request cap, its store SQLite or PostgreSQL."""
    environ = {"TVMREPRO_HOME": str(tmp_path)}
    if request.param == "postgres":
        environ["DATABASE_URL"] = request.getfixturevalue("clean_postgres")
    yield from app_knowing_both(Settings.from_env(environ))


def service_of(app: Flask) -> JobService:
    found: JobService = app.extensions["tvmrepro"]
    return found


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def with_files(*files: dict[str, Any]) -> dict[str, Any]:
    return job({"script": SCRIPT, "files": list(files)})


def refused(client: FlaskClient, body: dict[str, Any]) -> tuple[str, str]:
    status, answer = post(client, body)
    assert status == 400, answer
    return answer["error"]["field"], answer["error"]["message"]


def test_what_the_api_refuses_names_the_field_and_the_cap(client: FlaskClient) -> None:
    field, message = refused(client, with_files({"name": "big.onnx",
                                                 "content": b64(bytes(MAX_FILE_BYTES + 1))}))
    assert field == "case.files[0].content" and "over the cap of 16 MiB" in message
    many = [{"name": f"in{n}.pkl", "content": "eA=="} for n in range(MAX_FILES + 1)]
    field, message = refused(client, with_files(*many))
    assert field == "case.files" and f"over the cap of {MAX_FILES}" in message
    field, message = refused(client, with_files({"name": "x.npy", "content": "eA=="},
                                                {"name": "../etc/passwd", "content": "eA=="}))
    assert field == "case.files[1].name" and "not a plain file name" in message
    field, message = refused(client, with_files({"name": "x.npy", "content": "%%%="}))
    assert field == "case.files[0].content" and "not base64" in message
    field, message = refused(client, with_files({"name": "x.npy", "content": "eA=="},
                                                {"name": "x.npy", "content": "eQ=="}))
    assert field == "case.files[1].name" and "given twice" in message
    # A digest alone does not fetch a stored file: its content must come with it.
    field, message = refused(client, with_files({"name": "x.npy", "sha256": "a" * 64, "size": 1}))
    assert field == "case.files[0].content" and "missing" in message


def test_the_most_files_the_caps_allow_fit_the_request_cap(app: Flask,
                                                           client: FlaskClient) -> None:
    halves = [bytes([n]) * MAX_FILE_BYTES for n in (1, 2)]  # 32 MiB in all, 42.7 MiB in base64
    body = with_files(*[{"name": f"part{n}.bin", "content": b64(data)}
                        for n, data in enumerate(halves)])
    status, answer = post(client, body)
    assert status == 202, answer
    assert 42 << 20 < len(json.dumps(body)) <= MAX_REQUEST_BYTES  # the body that was taken
    digests = [hashlib.sha256(data).hexdigest() for data in halves]
    assert answer["files"] == [{"name": f"part{n}.bin", "sha256": digests[n],
                                "size": MAX_FILE_BYTES} for n in (0, 1)]
    stored = service_of(app).store.job(answer["id"], results=False)
    assert stored is not None
    assert all("content" not in entry for entry in stored.case["files"])  # digests only
    assert service_of(app).store.blob_sizes() == dict.fromkeys(digests, MAX_FILE_BYTES)


def finish(app: Flask, answer: dict[str, Any]) -> None:
    """Store what a worker would for each run of the job: the script failed."""
    store = service_of(app).store
    for run in answer["runs"]:
        store.claim(run["id"], "test:1", 3, 5.0, lambda _claimer: False)
        finish_run(store, answer["id"], run["id"], Result.model_validate({
            "environment": run["environment"], "variant": run["variant"], "status": "error",
            "stage": "script", "error_type": "ValueError", "message": "bad model",
            "signature": "ValueError: bad model"}))


def test_a_file_is_stored_once_and_the_same_files_are_a_cache_hit(app: Flask,
                                                                 client: FlaskClient) -> None:
    model = {"name": "x.npy", "content": b64(b"\x93NUMPY one model")}
    status, first = post(client, with_files(model))
    assert status == 202 and not first["cached_runs"]
    finish(app, first)
    status, second = post(client, with_files(dict(model)))
    assert status == 202 and second["cached_runs"] == len(second["runs"]) == 2
    assert second["files"] == first["files"]
    report = client.get(f"/api/v1/jobs/{second['id']}/report.md").get_data(as_text=True)
    assert "`python repro.py` with `x.npy` beside it" in report
    assert len(service_of(app).store.blob_sizes()) == 1  # two jobs, one stored file
    other = {**model, "content": b64(b"\x93NUMPY another model")}
    status, third = post(client, with_files(other))
    assert status == 202 and not third["cached_runs"]  # the same script, another model
    assert len(service_of(app).store.blob_sizes()) == 2


def test_a_triage_of_imported_reports_stores_their_files(app: Flask, client: FlaskClient,
                                                         tmp_path: Path) -> None:
    (tmp_path / "a240.onnx").write_bytes(b"an onnx model")
    (tmp_path / "inputs.pkl").write_bytes(b"pickled inputs")
    corpus = Path(__file__).parents[1] / "tracker" / "corpus" / "issues.json"
    (report,) = [r for r in reports_json(import_file(corpus, tmp_path)) if r["number"] == 17876]
    status, answer = post(client, {"kind": "triage", "reports": [report],
                                   "environments": [NEW_ENV], "wait": True})
    assert status == 202, answer
    store = service_of(app).store
    (run_job,) = store.triage_run_jobs(answer["id"])
    stored = store.job(run_job, results=False)
    assert stored is not None
    assert [(f["name"], f["size"]) for f in stored.case["files"]] == [("a240.onnx", 13),
                                                                       ("inputs.pkl", 14)]
    assert all("content" not in f for f in stored.case["files"])
    assert sorted(store.blob_sizes().values()) == [13, 14]
