"""Hostile and malformed request bodies: always a 4xx naming what is wrong, never a 500."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server

from service.app import create_app
from service.hosts import AllowedHosts
from tests.service.in_process import SMALL_LIMIT, job, post
from tests.service.stack import Backend, Stack
from tvmrepro.settings import Settings


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
    ("x = 1\x00", "holds a NUL character"),  # refused for every store, before the parser
])
def test_a_script_the_parser_cannot_take_is_400(client: FlaskClient,  # noqa: F811
                                                script: str, problem: str) -> None:
    status, body = post(client, job({"script": script}))
    assert status == 400, body
    assert body["error"]["field"] == "case.script" and problem in body["error"]["message"], body


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/api/v1/jobs/nope", "/healthz", "/",
                                  "/api/v1/environments"])
def test_a_foreign_host_is_400_naming_it(client: FlaskClient, path: str) -> None:  # noqa: F811
    # A page on attacker.example that rebinds its name to 127.0.0.1 sends its own Host.
    for method in ("GET", "POST", "DELETE"):
        response = client.open(path, method=method, headers={"Host": "attacker.example:8000"},
                               data="{}", content_type="application/json")
        assert response.status_code == 400, (method, response.data)
        error = response.get_json()["error"]
        assert error["field"] == "Host" and "'attacker.example:8000'" in error["message"]
        assert "TVMREPRO_ALLOWED_HOSTS" in error["message"]


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000",
                                  "LOCALHOST.:8000"])
def test_localhost_names_are_answered(client: FlaskClient, host: str) -> None:  # noqa: F811
    assert client.get("/healthz", headers={"Host": host}).status_code == 200


def test_a_deployment_names_its_hosts(tmp_path: Path) -> None:
    # Compose's service name (api) and a site's names; the bound address; "*" for any.
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_HOST": "10.1.2.3",
                                  "TVMREPRO_ALLOWED_HOSTS": "api, .repro.example.org,"})
    hosts = AllowedHosts.of(settings)
    assert [hosts.allows(h) for h in ("api:8000", "10.1.2.3:8000", "x.repro.example.org",
                                      "repro.example.org.evil", "apix", "attacker.example")] == [
        True, True, True, False, False, False]
    deployed = create_app(settings)
    try:
        http = deployed.test_client()
        assert http.get("/healthz", headers={"Host": "api:8000"}).status_code == 200
        assert http.get("/healthz", headers={"Host": "attacker.example"}).status_code == 400
    finally:
        deployed.extensions["tvmrepro"].store.dispose()
    wildcard = AllowedHosts.of(settings.model_copy(update={"host": "0.0.0.0"}))
    assert wildcard.allows(socket.gethostname()) and not wildcard.allows("0.0.0.0")
    anything = AllowedHosts.of(settings.model_copy(update={"allowed_hosts": "*"}))
    assert anything.allows("attacker.example")


READ_TIMEOUT_S = 2  # the slow-client test's API: a request must arrive whole within this
# Each slow client is closed after a read timeout or two (two rounds of the API's threads), and
# /healthz answered meanwhile; a server that let them trickle would hold them for ever.
SLOW_BOUND_S = 10 * READ_TIMEOUT_S


@pytest.fixture
def api_only(tmp_path: Path) -> Iterator[Stack]:
    """The API alone (gunicorn, as served), with a short read timeout."""
    home = tmp_path / "home"
    home.mkdir()
    running = Stack(Backend("embedded"), home, TVMREPRO_READ_TIMEOUT_S=str(READ_TIMEOUT_S))
    try:
        running.start_api()
        yield running
    finally:
        running.close()


def _slow_client(port: int, head: bytes, done: threading.Event) -> tuple[float, bytes]:
    """Send `head`, then one byte every 0.3 s until the server closes the connection (or
    `done`); how long the server kept it open and what it answered."""
    started = time.monotonic()
    answer = b""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head)
        sock.settimeout(0.3)
        while not done.is_set():
            try:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
            except TimeoutError:
                with contextlib.suppress(OSError):
                    sock.sendall(b" ")
            except OSError:  # reset: closed as well
                break
    return time.monotonic() - started, answer


def test_slow_clients_do_not_starve_the_others(api_only: Stack) -> None:
    # Ten clients send their bodies a byte at a time (more than the API's 8 threads), two
    # their headers: the API's front holds each until the read timeout, then answers 408 and
    # closes it; /healthz answers all the while.
    body = (b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
            b"\r\nContent-Length: 100000\r\n\r\n{\"case\": ")
    header = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    done = threading.Event()
    with ThreadPoolExecutor(12) as pool:
        slow = [pool.submit(_slow_client, api_only.port, head, done)
                for head in [body] * 10 + [header] * 2]
        time.sleep(0.5)
        try:
            for _ in range(4):  # while they trickle (they would for ever, unless closed)
                health = httpx.get(f"{api_only.url}/healthz", timeout=SLOW_BOUND_S)
                assert health.status_code == 200, health.text
                time.sleep(0.5)
            closed = [future.result(timeout=2 * SLOW_BOUND_S) for future in slow]
        finally:
            done.set()
    for held, answer in closed:
        assert held < SLOW_BOUND_S, (held, answer)
    for _, answer in closed:
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert f"did not arrive within {READ_TIMEOUT_S} s".encode() in answer, answer
    assert "Traceback" not in api_only.logs()


def test_a_package_version_no_environment_pins_is_refused(client: FlaskClient) -> None:  # noqa: F811
    script = {"script": "import torch\nprint(torch.__version__)\n"}
    status, body = post(client, job({**script, "requires": {"torch": "2.7.1"}}))
    assert status == 400, body
    assert body["error"]["field"] == "case.requires.torch", body
    assert "no pinned environment has torch 2.7.1" in body["error"]["message"]
    assert "2.13.0" in body["error"]["message"]  # what they do pin
    status, body = post(client, job({**script, "requires": {"torch": "2.13.0"}}))
    assert status != 400, body
