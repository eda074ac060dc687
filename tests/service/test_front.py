"""The API's front (service/front.py) in front of a real API (gunicorn, the embedded store), as
`tvmrepro serve` runs them (slow and reconnecting clients: the hostile suite); one client holds
at most its connections; the client gunicorn hears of is the connection's, never
a header a client wrote; kept-alive, pipelined, HEAD and oversized requests are answered as
HTTP says. The attackers connect from other loopback addresses (127.0.0.2, ...) than /healthz's
probe (127.0.0.1): on Linux the whole of 127/8 is this host."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import NEW_ENV
from tests.service.stack import Backend, Stack, make_home

PER_CLIENT = 8
BUDGET_RUNS = 2
MAX_REQUEST_BYTES = 200_000


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory, test_home: Path) -> Iterator[Stack]:
    """The API behind its front, no worker, small limits so that the tests reach them."""
    running = Stack(Backend("embedded"), make_home(tmp_path_factory.mktemp("front"), test_home),
                    TVMREPRO_FRONT_CLIENT_CONNECTIONS=str(PER_CLIENT),
                    TVMREPRO_MAX_SUBMITTER_RUNS=str(BUDGET_RUNS),
                    TVMREPRO_MAX_REQUEST_BYTES=str(MAX_REQUEST_BYTES),
                    TVMREPRO_READ_TIMEOUT_S="2")
    running.start_api()
    yield running
    running.close()


def connect(stack: Stack, source: str) -> socket.socket:
    """A connection to the front from the loopback address `source`."""
    return socket.create_connection(("127.0.0.1", stack.port), timeout=10,
                                    source_address=(source, 0))


def read_answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (or 10 s of silence)."""
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_a_client_holds_at_most_its_connections(front: Stack) -> None:
    held = [connect(front, "127.0.0.7") for _ in range(PER_CLIENT)]
    try:
        time.sleep(0.3)  # the front has counted them
        with connect(front, "127.0.0.7") as one_more:
            refused = read_answer(one_more)
        assert refused.startswith(b"HTTP/1.1 429 "), refused
        assert f"holds {PER_CLIENT} connections".encode() in refused, refused
        assert httpx.get(f"{front.url}/healthz").status_code == 200  # another client: served
        held.pop().close()
        time.sleep(0.3)
        with connect(front, "127.0.0.7") as again:
            again.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert read_answer(again).startswith(b"HTTP/1.1 200 ")
    finally:
        for sock in held:
            sock.close()


def test_a_client_cannot_name_itself_another_client(front: Stack) -> None:
    # Each run waits (no worker), so the budget of waiting runs counts every one; a client that
    # writes the front's own header is still the connection's address, and is refused its third.
    statuses = []
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.9")) as client:
        for forged in ("198.51.100.1", "198.51.100.2", "198.51.100.3"):
            case = {"title": forged, "script": f"print({forged!r})\n"}
            answer = client.post(f"{front.url}/api/v1/jobs",
                                 json={"case": case, "environments": [NEW_ENV], "wait": True},
                                 headers={"X-Tvmrepro-Client": forged})
            statuses.append(answer.status_code)
    assert statuses == [202, 202, 429], statuses


def test_kept_alive_and_pipelined_requests_are_answered_in_order(front: Stack) -> None:
    with connect(front, "127.0.0.10") as sock:
        ask = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        sock.sendall(ask + ask + b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Connection: close\r\n\r\n")
        answers = read_answer(sock)
    assert answers.count(b"HTTP/1.1 200 ") == 2 and answers.count(b"HTTP/1.1 404 ") == 1, answers
    assert answers.index(b"HTTP/1.1 404 ") > answers.rindex(b"HTTP/1.1 200 ")
    with httpx.Client(base_url=front.url) as client:  # one connection, several requests
        assert [client.get("/healthz").status_code for _ in range(5)] == [200] * 5


def test_head_answers_headers_only(front: Stack) -> None:
    get = httpx.get(f"{front.url}/healthz")
    head = httpx.head(f"{front.url}/healthz")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == get.headers["content-length"]


def test_a_body_over_the_cap_is_refused_before_it_is_sent(front: Stack) -> None:
    with connect(front, "127.0.0.11") as sock:
        sock.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: %d\r\n\r\n" % (10 * MAX_REQUEST_BYTES))
        refused = read_answer(sock)
    assert refused.startswith(b"HTTP/1.1 413 "), refused
    assert f"cap of {MAX_REQUEST_BYTES} bytes".encode() in refused, refused
