"""Hostile and malformed request bodies: always a 4xx naming what is wrong, never a 500."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server

from tests.service.test_api import SMALL_LIMIT, app, client, job, post  # noqa: F401  # fixtures


@pytest.mark.parametrize(("raw", "problem"), [
    ("[" * 30_000 + "]" * 30_000, "nested more than 32 levels deep"),
    ("[" * 40 + "]" * 40, "nested more than 32 levels deep"),
    ('{"case": {"title": "\\ud800"}}', "lone surrogate"),
    ('{"n": ' + "9" * 5000 + "}", "not acceptable JSON: Exceeds the limit"),
    ("{'single': 'quotes'}", "not JSON: Expecting property name enclosed in double quotes"),
])
def test_malformed_bodies_are_400(client: FlaskClient, raw: str, problem: str) -> None:  # noqa: F811
    status, body = post(client, raw)
    assert status == 400, body
    assert body["error"]["field"] == "body" and problem in body["error"]["message"]


@pytest.mark.parametrize("value", ["30", True, 30.5])
def test_case_numbers_are_strict(client: FlaskClient, founding_case: dict[str, Any],  # noqa: F811
                                 value: Any) -> None:
    status, body = post(client, job({**founding_case, "timeout_s": value}))
    assert status == 400 and body["error"]["field"] == "case.timeout_s", body


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_only_json_is_taken(client: FlaskClient, founding_case: dict[str, Any],  # noqa: F811
                            content_type: str | None) -> None:
    response = client.post("/api/v1/jobs", data=json.dumps(job(founding_case)),
                           content_type=content_type)
    assert response.status_code == 415
    assert "application/json" in response.get_json()["error"]["message"]


def test_bytes_that_are_not_utf8_are_400(client: FlaskClient) -> None:  # noqa: F811
    response = client.post("/api/v1/jobs", data=b'{"case": "\xff\xfe"}',
                           content_type="application/json")
    assert response.status_code == 400
    assert "not valid UTF-8" in response.get_json()["error"]["message"]


def test_every_answer_forbids_sniffing_and_framing(client: FlaskClient) -> None:  # noqa: F811
    for response in (client.get("/healthz"), client.get("/api/v1/jobs/nope"),
                     client.post("/api/v1/jobs", data="x", content_type="text/plain")):
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


@pytest.fixture
def http_url(app: Flask) -> Iterator[str]:  # noqa: F811
    """The app behind a real HTTP server (chunked bodies need a real socket)."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_a_chunked_body_over_the_cap_is_413(http_url: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"case": {"source": "'
        for _ in range(4 * SMALL_LIMIT // 1024):
            yield b"x" * 1024
        yield b'"}}'

    response = httpx.post(f"{http_url}/api/v1/jobs", content=chunks(),
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text
    assert httpx.get(f"{http_url}/healthz").status_code == 200


DEEP = "-" * 10_000 + "1"  # deeper than Python's parser goes (MemoryError or RecursionError)


@pytest.mark.parametrize(("change", "field", "problem"), [
    ({"source": DEEP}, "case.source", "nested more deeply than Python's parser allows"),
    ({"source": "x" + ".y" * 12_000}, "case.source", "nested more deeply than Python's"),
    ({"source": "(" * 300 + ")" * 300}, "case.source", "too many nested parentheses"),
    ({"source": ""}, "case.source", "empty: it holds no Python statement"),
    ({"source": "\n  \n# only a comment\n"}, "case.source", "empty: it holds no Python"),
    ({"entry": "main", "reference": DEEP}, "case.reference", "nested more deeply than"),
    ({"entry": "main", "reference": "np.sum(x"}, "case.reference", "not a Python expression"),
])
def test_what_the_parser_cannot_take_is_400(client: FlaskClient,  # noqa: F811
                                            founding_case: dict[str, Any],
                                            change: dict[str, Any], field: str,
                                            problem: str) -> None:
    status, body = post(client, job({**founding_case, **change}))
    assert status == 400, body
    assert body["error"]["field"] == field and problem in body["error"]["message"], body


@pytest.mark.parametrize(("script", "problem"), [
    ("", "empty: it holds no Python statement"), ("# nothing\n", "empty: it holds no Python"),
    (DEEP, "nested more deeply than Python's parser allows"),
    ("x = 1\x00", "source code string cannot contain null bytes"),
])
def test_a_script_the_parser_cannot_take_is_400(client: FlaskClient,  # noqa: F811
                                                script: str, problem: str) -> None:
    status, body = post(client, job({"script": script}))
    assert status == 400, body
    assert body["error"]["field"] == "case.script" and problem in body["error"]["message"], body
