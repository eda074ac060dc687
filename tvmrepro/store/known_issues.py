"""The known_issues rows of the job store: the signature of each triaged issue's bug, written
by a triage and read when a job is shown (its likely duplicates)."""

from __future__ import annotations

import time

import sqlalchemy as sa

from tvmrepro.api.issues import KnownIssue
from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase

_FIELDS = ("number", "url", "title", "state", "signature")


class KnownIssueRows(StoreBase):
    """The known_issues table (part of `Store`)."""

    def record_known_issues(self, issues: list[KnownIssue], triaged: list[int]) -> None:
        """Store `issues`, replacing what an earlier triage stored of every issue in `triaged`
        (an issue triaged again that no longer fails anywhere is known no more)."""
        numbers = sorted(set(triaged) | {issue.number for issue in issues})
        with self._write() as conn:
            conn.execute(t.known_issues.delete().where(t.known_issues.c.number.in_(numbers)))
            if issues:
                now = time.time()
                conn.execute(t.known_issues.insert(), [
                    {**issue.model_dump(), "recorded_at": now} for issue in issues])

    def known_issues_failing_with(self, signatures: list[str]) -> list[KnownIssue]:
        """The known issues whose bug has one of these signatures, by number."""
        if not signatures:
            return []
        columns = [t.known_issues.c[name] for name in _FIELDS]
        query = (sa.select(*columns).where(t.known_issues.c.signature.in_(sorted(set(signatures))))
                 .order_by(t.known_issues.c.number))
        with self.engine.connect() as conn:
            return [KnownIssue.model_validate(dict(row)) for row in conn.execute(query).mappings()]
