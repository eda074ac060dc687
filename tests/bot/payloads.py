"""Recorded webhook payloads (tests/cases/github) made into deliveries: an issue's number,
title and body, a comment's author and association set; signed with real HMAC-SHA256."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import uuid
from functools import cache
from typing import Any

from tests.conftest import CASES

PAYLOADS = CASES / "github"
SECRET = "the-webhook-secret-of-the-tests"
WEBHOOK = "/api/v1/github/webhook"


@cache
def recorded(name: str) -> dict[str, Any]:
    """A recorded payload ("issues.opened", "issue_comment.created", ...)."""
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text())
    return data


def issue_event(action: str, number: int, title: str, body: str,
                author: str = "reporter-one") -> dict[str, Any]:
    """An `issues` delivery (opened, or edited with its body changed)."""
    payload = copy.deepcopy(recorded(f"issues.{action}"))
    issue = payload["issue"]
    issue.update(number=number, title=title, body=body,
                 html_url=f"https://github.com/apache/tvm/issues/{number}")
    issue["user"]["login"] = author
    return payload


def comment_event(number: int, body: str, login: str, association: str,
                  author: str = "reporter-one", before: str | None = None,
                  comment: int | None = None) -> dict[str, Any]:
    """An `issue_comment` delivery: `login` (of `association`) comments on issue `number`
    (edits comment id `comment`, whose body was `before`, where `before` is given)."""
    action = "created" if before is None else "edited"
    payload = copy.deepcopy(recorded(f"issue_comment.{action}"))
    payload["issue"].update(number=number, html_url=f"https://github.com/apache/tvm/issues/{number}")
    payload["issue"]["user"]["login"] = author
    payload["comment"].update(body=body, author_association=association,
                              id=comment or uuid.uuid4().int % 10 ** 10)
    if before is not None:
        payload["changes"] = {"body": {"from": before}}
    payload["comment"]["user"]["login"] = login
    payload["sender"]["login"] = login
    return payload


def signature(body: bytes, secret: str = SECRET) -> str:
    """GitHub's X-Hub-Signature-256 of a body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers(event: str, body: bytes, delivery: str | None = None,
            secret: str = SECRET) -> dict[str, str]:
    """A delivery's headers, as GitHub sends them."""
    return {"Content-Type": "application/json", "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-GitHub-Hook-ID": "512345678", "User-Agent": "GitHub-Hookshot/a1b2c3d",
            "X-Hub-Signature-256": signature(body, secret)}


def encoded(payload: dict[str, Any]) -> bytes:
    """The body GitHub sends."""
    return json.dumps(payload).encode()
