"""Known issues are the service's shared memory: only a triage its maintainer submitted (the
deployment's token) writes them; anyone else's triage of the same issue renames, relinks or
erases nothing, and keeps its answer to its own job. A known issue links only to the tracker.
Served whole from the cache (results stored here), so no TVM runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV
from tests.service.test_submitters import TOKEN, post
from tests.tracker.stored_jobs import stored_job
from tvmrepro.cases import parse_case
from tvmrepro.results import Result, Status
from tvmrepro.settings import Settings
from tvmrepro.store import Store

FAILING = "import tvm\nraise ValueError('the bug of #4242')\n"
PASSING = "import tvm\nprint('fine')\n"
VICTIM = "https://github.com/apache/tvm/issues/4242"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[FlaskClient, Store]]:
    """The API in process, with a maintainer's token; both scripts' results in its cache."""
    app = create_app(Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                        "TVMREPRO_MAINTAINER_TOKEN": TOKEN}))
    store = app.extensions["tvmrepro"].store
    for script, result in ((FAILING, Result(environment=NEW_ENV, variant="script",
                                            status=Status.ERROR, error_type="ValueError",
                                            message="the bug of #4242", stage="script",
                                            signature="ValueError: the bug of #4242")),
                           (PASSING, Result(environment=NEW_ENV, variant="script",
                                            status=Status.OK, stage="script"))):
        stored_job(store, parse_case({"title": "measured", "script": script}), [result])
    yield app.test_client(), store
    service: JobService = app.extensions["tvmrepro"]
    service.store.dispose()


def triage(client: FlaskClient, script: str, token: str | None = None, address: str = "",
           **issue: Any) -> dict[str, Any]:
    """A finished triage of issue #4242 with `script` (its fields overridden by `issue`)."""
    report = {"number": 4242, "title": "the real bug", "state": "OPEN", "url": VICTIM,
              "body": f"### Steps\n\n```python\n{script}```\n", **issue}
    status, body = post(client, {"kind": "triage", "environments": [NEW_ENV],
                                 "reports": [report], "wait": True},
                        address or "198.51.100.7", token)
    assert status == 202 and body["status"] == "done", body
    return body


def known(store: Store) -> list[tuple[int, str | None, str, str | None]]:
    return [(i.number, i.url, i.title, i.state)
            for i in store.known_issues_failing_with(["ValueError: the bug of #4242"])]


def test_only_the_maintainers_triage_keeps_known_issues(
        service: tuple[FlaskClient, Store]) -> None:
    client, store = service
    anyones = triage(client, FAILING)
    assert not anyones["triage"]["records_known_issues"]
    assert anyones["triage"]["groups"][0]["reports"] == [4242]  # its answer is its own
    assert known(store) == []
    mine = triage(client, FAILING, TOKEN)
    assert mine["triage"]["records_known_issues"]
    assert known(store) == [(4242, VICTIM, "the real bug", "OPEN")]


def test_another_client_cannot_rename_relink_or_erase_a_known_issue(
        service: tuple[FlaskClient, Store]) -> None:
    client, store = service
    triage(client, FAILING, TOKEN)
    before = known(store)
    # The attacks measured: the same number with another title, state and host; then a
    # passing script (which, from the maintainer, means the bug is known no more).
    triage(client, FAILING, address="192.0.2.9", title="pwned", state="CLOSED",
           url="https://evil.example/issues/4242")
    triage(client, PASSING, address="192.0.2.9")
    assert known(store) == before
    # A run failing that way names the maintainer's issue, linked to the tracker.
    status, job = post(client, {"case": {"title": "new", "script": FAILING},
                                "environments": [NEW_ENV], "wait": True}, "192.0.2.10")
    assert status == 202
    assert [(i["number"], i["title"], i["url"]) for i in job["likely_duplicates"]] == [
        (4242, "the real bug", VICTIM)]


def test_a_link_off_the_tracker_is_dropped(service: tuple[FlaskClient, Store]) -> None:
    client, store = service
    for url in ("https://evil.example/apache/tvm/issues/4242",
                "https://github.com/apache/tvm.evil/issues/4242",
                "https://github.com/apache/tvm/issues/4242@evil.example",
                "javascript:alert(1)"):
        job = triage(client, FAILING, TOKEN, url=url)
        assert job["triage"]["urls"] == [None], url
        # Known by its number on the tracker, whatever its report said.
        assert known(store) == [(4242, VICTIM, "the real bug", "OPEN")], url
    report = client.get(f"/api/v1/jobs/{job['id']}/report.md").get_data(as_text=True)
    assert "evil" not in report


@pytest.mark.parametrize("number", [0, -5, 10_000_001, 2 ** 40])
def test_an_issue_number_no_tracker_has_is_refused(service: tuple[FlaskClient, Store],
                                                   number: int) -> None:
    client, _ = service
    status, body = post(client, {"kind": "triage", "environments": [NEW_ENV], "wait": True,
                                 "reports": [{"number": number, "title": "t", "body": "x"}]})
    assert status == 400 and body["error"]["field"] == "reports[0].number", body
