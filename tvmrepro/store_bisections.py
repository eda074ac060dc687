"""The bisections rows of the job store: a bisect job's options, its bisect object, and the
locked step that adds its next probes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from tvmrepro import schema as t
from tvmrepro.rows import JobRow, RunRow
from tvmrepro.store_base import StoreBase


class BisectionUpdate(NamedTuple):
    """What one step of a bisection stores: runs to add, the job's environments, the object."""

    runs: list[RunRow]
    environments: list[str]
    result: dict[str, Any]
    seen: int


# (the job with its runs, the bisections row) -> the update to store
BisectionStep = Callable[[JobRow, dict[str, Any]], BisectionUpdate]


class BisectionRows(StoreBase):
    """The bisections table (part of `Store`)."""

    if TYPE_CHECKING:
        def job(self, job_id: str, results: bool = True) -> JobRow | None:
            """A job with its runs (`Store.job`)."""

    def save_bisection(self, job_id: str, options: dict[str, Any]) -> None:
        """Record a bisect job's options (before its job: an orphan row is harmless)."""
        with self._write() as conn:
            conn.execute(t.bisections.insert().values(job_id=job_id, options=options, result=None,
                                                      seen=0, updated_at=time.time()))

    def forget_bisection(self, job_id: str) -> None:
        """Remove a bisection whose job was not admitted."""
        with self._write() as conn:
            conn.execute(t.bisections.delete().where(t.bisections.c.job_id == job_id))

    def bisection(self, job_id: str) -> dict[str, Any] | None:
        """A bisect job's row: options, result (the bisect object) and seen, or None."""
        query = sa.select(t.bisections).where(t.bisections.c.job_id == job_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return dict(row) if row else None

    def advance_bisection(self, job_id: str, step: BisectionStep) -> list[RunRow]:
        """Apply `step` to a bisect job under its row's lock: store the runs it adds (the job's
        environments follow), its bisect object and `seen`; the added runs (none: no bisection)."""
        lock = (sa.select(t.bisections).where(t.bisections.c.job_id == job_id)
                .with_for_update())
        with self._write() as conn:
            row = conn.execute(lock).mappings().first()
            job = self.job(job_id) if row is not None else None
            if row is None or job is None:
                return []
            update = step(job, dict(row))
            if update.runs:
                conn.execute(t.runs.insert(), [run.columns() for run in update.runs])
            if update.environments != job.environments:
                conn.execute(t.jobs.update().where(t.jobs.c.id == job_id)
                             .values(environments=update.environments))
            conn.execute(t.bisections.update().where(t.bisections.c.job_id == job_id).values(
                result=update.result, seen=update.seen, updated_at=time.time()))
        return update.runs
