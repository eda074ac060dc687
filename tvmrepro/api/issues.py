"""The tracker's part of the wire: a known issue, as a job's likely duplicates show it."""

from __future__ import annotations

from pydantic import BaseModel


class KnownIssue(BaseModel):
    """An issue whose report fails with `signature` (as triage groups them)."""

    number: int
    url: str | None
    title: str
    state: str | None
    signature: str
