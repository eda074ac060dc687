"""The narrowings rows of the job store: a reduce or extract job's options, how far it got
(with its best case so far), and its answer or why there is none. The job layer
(tvmrepro.jobs.narrow) gives them their meaning; the worker writes them as it goes."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase, changed


class StoredNarrowing(BaseModel):
    """A narrowings row as stored: the options asked, the progress and the answer as JSON."""

    options: dict[str, Any]
    progress: dict[str, Any] | None
    result: dict[str, Any] | None
    error: str | None


class NarrowingRows(StoreBase):
    """The narrowings table (part of `Store`)."""

    def narrowing(self, job_id: str) -> StoredNarrowing | None:
        """A reduce or extract job's row, or None (another kind of job)."""
        query = sa.select(t.narrowings).where(t.narrowings.c.job_id == job_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return StoredNarrowing.model_validate(dict(row)) if row is not None else None

    def add_narrowing(self, job_id: str, kind: str, options: dict[str, Any], now: float) -> None:
        """Store a new job's row: its options, no progress and no answer yet."""
        with self._write() as conn:
            conn.execute(t.narrowings.insert().values(
                job_id=job_id, kind=kind, options=options, progress=None, result=None,
                error=None, updated_at=now))

    def drop_narrowing(self, job_id: str) -> None:
        """Remove a job's row (its job was refused: QueueFull)."""
        with self._write() as conn:
            conn.execute(t.narrowings.delete().where(t.narrowings.c.job_id == job_id))

    def save_narrowing_progress(self, job_id: str, progress: Mapping[str, Any]) -> None:
        """Record how far the narrowing got (and its best case so far)."""
        self._update_narrowing(job_id, progress=progress)

    def save_narrowing_answer(self, job_id: str, result: dict[str, Any] | None,
                              error: str | None) -> None:
        """Record the answer, or why there is none."""
        self._update_narrowing(job_id, result=result, error=error)

    def _update_narrowing(self, job_id: str, **values: Any) -> None:
        with self._write() as conn:
            conn.execute(t.narrowings.update().where(t.narrowings.c.job_id == job_id)
                         .values(updated_at=time.time(), **values))
            changed(conn, [job_id])
