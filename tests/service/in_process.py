"""The API in process (Flask's test client): job bodies, a POST, and a store that refuses writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from flask.testing import FlaskClient

from tests.conftest import NEW_ENV, OLD_ENV

SMALL_LIMIT = 64 * 1024


def post(client: FlaskClient, body: Any) -> tuple[int, dict[str, Any]]:
    """POST /api/v1/jobs with a JSON value (or raw text); status and decoded answer."""
    data = body if isinstance(body, str) else json.dumps(body)
    response = client.post("/api/v1/jobs", data=data, content_type="application/json")
    return response.status_code, response.get_json()


def job(case: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A run job on both founding-case environments (queued: these tests run no worker)."""
    return {"case": case, "environments": [OLD_ENV, NEW_ENV], "wait": True, **extra}


WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@contextmanager
def writes_refused(engine: sa.engine.Engine) -> Iterator[list[str]]:
    """Every write statement on `engine` fails (as on a read-only store) and is recorded."""
    attempted: list[str] = []

    def refuse(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(WRITES):
            attempted.append(statement)
            raise PermissionError(f"the store refuses writes: {statement[:60]}")

    sa.event.listen(engine, "before_cursor_execute", refuse)
    try:
        yield attempted
    finally:
        sa.event.remove(engine, "before_cursor_execute", refuse)
