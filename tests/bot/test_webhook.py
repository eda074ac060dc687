"""The webhook in process (Flask's test client, a real store; no worker): deliveries without
the App's signature, with another secret's, with a body changed after signing, or replayed are
refused, and logged; a ping and an installation are taken; the log reads back through
GET /api/v1/github/actions and the page /github, escaped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.bot.payloads import SECRET, WEBHOOK, comment_event, encoded, headers, recorded
from tests.service.conftest import app_knowing_both
from tvmrepro.settings import Settings


@pytest.fixture
def bot_app(tmp_path: Path) -> Iterator[Flask]:
    """An app with the bot's secret set (nothing serves its runs: none are asked here)."""
    yield from app_knowing_both(Settings.from_env({
        "TVMREPRO_HOME": str(tmp_path), "TVMREPRO_GITHUB_WEBHOOK_SECRET": SECRET}))


def deliver(client: FlaskClient, event: str, body: bytes,
            sent: dict[str, str]) -> tuple[int, dict[str, object]]:
    response = client.post(WEBHOOK, data=body, headers=sent)
    return response.status_code, response.get_json()


def test_a_delivery_without_the_apps_signature_is_refused(bot_app: Flask) -> None:
    client = bot_app.test_client()
    body = encoded(recorded("ping"))
    unsigned = {k: v for k, v in headers("ping", body).items() if k != "X-Hub-Signature-256"}
    assert deliver(client, "ping", body, unsigned)[0] == 401
    forged = headers("ping", body, secret="another-secret-entirely")
    status, answer = deliver(client, "ping", body, forged)
    assert status == 401 and answer["error"]["field"] == "X-Hub-Signature-256"  # type: ignore[index]
    # Signed, then changed: the signature is of other bytes.
    tampered = body.replace(b"awesome", b"awesomE")
    assert deliver(client, "ping", tampered, headers("ping", body))[0] == 401
    sha1 = {**headers("ping", body), "X-Hub-Signature-256": "sha1=" + "0" * 40}
    assert deliver(client, "ping", body, sha1)[0] == 401
    actions = client.get("/api/v1/github/actions").get_json()
    assert [a["action"] for a in actions["actions"]] == ["refused"] * 4
    assert {a["http_status"] for a in actions["actions"]} == {401}


def test_a_replayed_delivery_is_refused(bot_app: Flask) -> None:
    client = bot_app.test_client()
    body = encoded(recorded("ping"))
    sent = headers("ping", body, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958")
    status, answer = deliver(client, "ping", body, sent)
    assert (status, answer["outcome"]) == (202, "pong")
    status, answer = deliver(client, "ping", body, sent)
    assert status == 409 and answer["error"]["field"] == "X-GitHub-Delivery"  # type: ignore[index]
    # The same event under a new delivery id is a delivery of its own.
    assert deliver(client, "ping", body, headers("ping", body))[0] == 202


def test_an_installation_is_logged_and_shown_escaped(bot_app: Flask) -> None:
    client = bot_app.test_client()
    payload = recorded("installation.created")
    payload = {**payload, "installation": {**payload["installation"], "account": {
        "login": "<script>alert(1)</script>", "id": 1}}}
    body = encoded(payload)
    status, answer = deliver(client, "installation", body, headers("installation", body))
    assert status == 202 and "apache/tvm" in str(answer["outcome"])
    page = client.get("/github").get_data(as_text=True)
    assert "installation created by &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)</script>" not in page


def test_a_comment_without_a_command_or_from_another_repository_asks_nothing(
        bot_app: Flask) -> None:
    client = bot_app.test_client()
    body = encoded(comment_event(20200, "Thanks, I see it too.", "someone", "NONE"))
    assert deliver(client, "issue_comment", body, headers("issue_comment", body))[1][
        "outcome"] == "no command"
    other = comment_event(20200, "@tvm-repro run", "someone", "MEMBER")
    other["repository"] = {**other["repository"], "full_name": "someone/fork"}
    body = encoded(other)
    assert deliver(client, "issue_comment", body, headers("issue_comment", body))[1][
        "outcome"] == "issue_comment: nothing to do"


def test_without_a_secret_the_webhook_is_not_there(tmp_path: Path) -> None:
    body = encoded(recorded("ping"))
    for app in app_knowing_both(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)})):
        response = app.test_client().post(WEBHOOK, data=body, headers=headers("ping", body))
        assert response.status_code == 404
        assert "TVMREPRO_GITHUB_WEBHOOK_SECRET" in response.get_json()["error"]["message"]


def test_a_sweep_is_the_maintainers(bot_app: Flask) -> None:
    client = bot_app.test_client()
    assert client.post("/api/v1/github/sweep").status_code == 403


def test_a_command_edited_into_a_comment_is_taken_once(bot_app: Flask, tmp_path: Path) -> None:
    """An edit asks only the commands it adds; GitHub's redelivery of it (a new delivery id)
    asks nothing again."""
    from tvmrepro.store import Store

    client = bot_app.test_client()

    def send(body: str, before: str | None = None) -> object:
        payload = encoded(comment_event(20200, body, "maintainer-one", "MEMBER", before=before,
                                        comment=2512345678))
        status, answer = deliver(client, "issue_comment", payload,
                                 headers("issue_comment", payload))
        assert status == 202, answer
        return answer["outcome"]

    assert send("Same here.") == "no command"
    dup = "Same here.\n@tvm-repro dup #17348\n"
    assert send(dup, before="Same here.") == "dup: noted: a duplicate of #17348"
    assert send(dup, before="Same here.") == "no command it did not take before"
    assert send(f"{dup}@tvm-repro undup\n", before=dup) == "undup: noted: not a duplicate"
    store = Store(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)}).store_url)
    found = store.bot_issue("apache/tvm", 20200)
    assert found and [c["name"] for c in found[0]["commands"]] == ["dup", "undup"]
