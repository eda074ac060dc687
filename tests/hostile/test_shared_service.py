"""`make hostile`, the service shared by strangers: a real API (gunicorn, the embedded store)
attacked through HTTP as a client of it would, each check a row of the suite's table.

Cost in proportion: a triage of 100,000 one-word reports (a request of 1 MB) is refused naming
the cap; a triage at the cap is read a page at a time, its first screen in under a second, and
eight clients reading it at once leave /healthz answering; one client's flood gets its own 429
naming its budget while another client is admitted. Shared memory: a known issue that the
maintainer's triage recorded is neither renamed, relinked nor erased by another client's triage
of the same issue, and no report links it to another host. Connections: 32 slow clients that
reconnect as soon as they are closed leave /healthz answering within a second (the API's front
holds them). Clients are told apart as a reverse
proxy tells the API (TVMREPRO_CLIENT_HEADER); no worker runs (the runs wait, or come from the
cache of results stored here).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import NEW_ENV
from tests.fixtures.ledger import Ledger
from tests.fixtures.slow_clients import HEALTHY_S as PROBE_S
from tests.fixtures.slow_clients import siege
from tests.service.stack import Backend, Stack, make_home
from tests.tracker.stored_jobs import stored_job
from tvmrepro.cases import parse_case
from tvmrepro.results import Result, Status
from tvmrepro.settings import MAX_TRIAGE_REPORTS

pytestmark = [pytest.mark.timeout(300)]
WHERE = "service"  # the table's runtime column: these attacks are the API's, on any runtime
TOKEN = "the-hostile-suites-maintainer-token"
CLIENT_HEADER = "X-Real-IP"
BUDGET_RUNS = 5
READERS = 8
SLOW_CLIENTS = 32  # four times the API's threads (2 processes x 4)
HEALTHY_S = 2.0
FAILING = "import tvm\nraise ValueError('the bug of #777')\n"
PASSING = "import tvm\nprint('fixed')\n"
TRACKER_LINK = "https://github.com/apache/tvm/issues/777"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, test_home: Path) -> Iterator[Stack]:
    """An API of its own (no worker) with a maintainer's token, behind a "proxy" header."""
    running = Stack(Backend("embedded"), make_home(tmp_path_factory.mktemp("shared"), test_home),
                    TVMREPRO_MAINTAINER_TOKEN=TOKEN, TVMREPRO_CLIENT_HEADER=CLIENT_HEADER,
                    TVMREPRO_MAX_SUBMITTER_RUNS=str(BUDGET_RUNS),
                    # A slow client is closed (and reconnects) within the attack's six seconds.
                    TVMREPRO_READ_TIMEOUT_S="2")
    running.start_api()
    yield running
    running.close()


def post(stack: Stack, body: dict[str, Any], client: str = "198.51.100.1",
         maintainer: bool = False) -> httpx.Response:
    headers = {CLIENT_HEADER: client} | ({"Authorization": f"Bearer {TOKEN}"} if maintainer
                                         else {})
    return stack.http.post("/api/v1/jobs", json={"wait": True, **body}, headers=headers)


def test_a_triage_of_100000_reports_is_refused_naming_the_cap(stack: Stack,
                                                               ledger: Ledger) -> None:
    body = {"kind": "triage", "environments": [NEW_ENV],
            "reports": [f"word{n}" for n in range(100_000)]}
    started = time.monotonic()
    answer = post(stack, body)
    took = time.monotonic() - started
    named = "TVMREPRO_MAX_TRIAGE_REPORTS" in answer.text and str(MAX_TRIAGE_REPORTS) in answer.text
    got = f"{answer.status_code} in {took:.1f} s, {len(json.dumps(body)) >> 10} KiB" + (
        ", names the cap" if named else f": {answer.text[:60]}")
    assert ledger.add(WHERE, "triage of 100,000 reports", "4xx naming the cap", got,
                      400 <= answer.status_code < 500 and named), answer.text


def test_a_triage_at_the_cap_is_read_a_page_at_a_time(stack: Stack, ledger: Ledger) -> None:
    reports = [{"number": 1000 + n, "title": f"report {n}", "state": "OPEN", "body": "word"}
               for n in range(MAX_TRIAGE_REPORTS)]
    answer = post(stack, {"kind": "triage", "environments": [NEW_ENV], "reports": reports})
    assert answer.status_code == 202, answer.text
    path = f"/api/v1/jobs/{answer.json()['id']}"
    stack.http.get(path)
    started = time.monotonic()
    first = stack.http.get(path)
    took = time.monotonic() - started
    page = first.json()["triage"]["page"]
    got = f"{took:.2f} s, {len(first.content) >> 10} KiB, {page['limit']} of {page['total']}"
    assert ledger.add(WHERE, f"first page of a {MAX_TRIAGE_REPORTS}-report triage",
                      "< 1 s, 50 reports", got,
                      took < 1.0 and len(first.json()["triage"]["reports"]) == 50), got
    slowest = healthz_beside_readers(stack, path)
    assert ledger.add(WHERE, f"/healthz beside {READERS} readers of it",
                      f"answers within {HEALTHY_S:g} s", f"slowest {slowest:.2f} s",
                      slowest < HEALTHY_S), stack.logs()


def healthz_beside_readers(stack: Stack, path: str, seconds: float = 3.0) -> float:
    """The slowest /healthz while READERS clients read `path` as fast as they can."""
    stop = threading.Event()

    def read() -> None:
        with httpx.Client(base_url=stack.url, timeout=30.0) as own:
            while not stop.is_set():
                own.get(path)

    readers = [threading.Thread(target=read, daemon=True) for _ in range(READERS)]
    for reader in readers:
        reader.start()
    slowest, deadline = 0.0, time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            started = time.monotonic()
            assert stack.http.get("/healthz").status_code == 200
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.1)
    finally:
        stop.set()
        for reader in readers:
            reader.join(timeout=30)
    return slowest


def test_one_clients_flood_is_refused_to_it_first(stack: Stack, ledger: Ledger) -> None:
    codes = []
    for n in range(BUDGET_RUNS + 3):
        case = {"title": f"flood {n}", "script": f"print({n})\n"}
        codes.append(post(stack, {"case": case, "environments": [NEW_ENV]}, "192.0.2.66"))
    refused = [answer for answer in codes if answer.status_code == 429]
    own = bool(refused) and "TVMREPRO_MAX_SUBMITTER_RUNS" in refused[0].text
    other = post(stack, {"case": {"title": "bystander", "script": "print('me')\n"},
                         "environments": [NEW_ENV]}, "192.0.2.67")
    got = (f"flooder 202: {len(codes) - len(refused)}, 429: {len(refused)}"
           f"{' (its budget)' if own else ''}; other: {other.status_code}")
    assert ledger.add(WHERE, "one client floods the queue", "its own 429, another's 202", got,
                      len(refused) == 3 and own and other.status_code == 202), got


def known_issue(stack: Stack) -> list[tuple[int, str | None, str, str | None]]:
    return [(i.number, i.url, i.title, i.state)
            for i in stack.store.known_issues_failing_with(["ValueError: the bug of #777"])]


def triage_777(stack: Stack, script: str, client: str, maintainer: bool = False,
               **issue: Any) -> dict[str, Any]:
    report = {"number": 777, "title": "the real bug", "state": "OPEN", "url": TRACKER_LINK,
              "body": f"### Steps\n\n```python\n{script}```\n", **issue}
    answer = post(stack, {"kind": "triage", "environments": [NEW_ENV], "reports": [report]},
                  client, maintainer)
    assert answer.status_code == 202, answer.text
    job: dict[str, Any] = answer.json()
    return job


def test_a_known_issue_is_the_maintainers(stack: Stack, ledger: Ledger) -> None:
    for script, result in ((FAILING, Result(environment=NEW_ENV, variant="script",
                                            status=Status.ERROR, error_type="ValueError",
                                            message="the bug of #777", stage="script",
                                            signature="ValueError: the bug of #777")),
                           (PASSING, Result(environment=NEW_ENV, variant="script",
                                            status=Status.OK, stage="script"))):
        stored_job(stack.store, parse_case({"title": "measured", "script": script}), [result])
    triage_777(stack, FAILING, "198.51.100.5", maintainer=True)
    before = known_issue(stack)
    triage_777(stack, FAILING, "203.0.113.66", title="renamed", state="CLOSED",
               url="https://evil.example/apache/tvm/issues/777")
    triage_777(stack, PASSING, "203.0.113.66")
    after = known_issue(stack)
    got = "unchanged" if after == before != [] else f"{before} -> {after}"
    assert ledger.add(WHERE, "known issue rewritten by another client", "unchanged", got,
                      after == before == [(777, TRACKER_LINK, "the real bug", "OPEN")]), got
    linked = triage_777(stack, FAILING, "198.51.100.5", maintainer=True,
                        url="https://evil.example/apache/tvm/issues/777")
    shown = linked["triage"]["urls"][0]
    got = f"view: {shown}, known: {known_issue(stack)[0][1]}"
    assert ledger.add(WHERE, "a link to another host", "dropped; the tracker's link", got,
                      shown is None and known_issue(stack)[0][1] == TRACKER_LINK), got


def test_slow_reconnecting_clients_leave_healthz_answering(stack: Stack, ledger: Ledger) -> None:
    seen = siege(stack.url, SLOW_CLIENTS, seconds=6.0)  # three read timeouts: each came back
    got = (f"{seen.bad} of {seen.probes} probes failed or over {PROBE_S:g} s, slowest "
           f"{seen.slowest:.2f} s; {seen.reconnects} reconnects")
    assert ledger.add(WHERE, f"{SLOW_CLIENTS} slow clients that reconnect",
                      f"/healthz within {PROBE_S:g} s", got,
                      seen.bad == 0 and seen.probes >= 10
                      and seen.reconnects >= SLOW_CLIENTS), got
