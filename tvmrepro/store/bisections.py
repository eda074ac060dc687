"""The bisections rows of the job store: a bisect job's options, its bisect object, and the
compare-and-set write of a step that adds its next probes (the step itself, which judges runs'
text, runs before it, outside every transaction)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from tvmrepro.lifecycle import RunState
from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase, changed
from tvmrepro.store.rows import JobRow, RunRow


class BisectionUpdate(NamedTuple):
    """What one step of a bisection stores: runs to add, the job's environments, the object."""

    runs: list[RunRow]
    environments: list[str]
    result: dict[str, Any]
    seen: int


# (the job with its runs, the bisections row) -> the update to store
BisectionStep = Callable[[JobRow, dict[str, Any]], BisectionUpdate]
ADVANCE_ATTEMPTS = 8  # steps computed again when other runs of the job finished meanwhile


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

    def save_windows(self, job_id: str, windows: list[dict[str, Any]]) -> bool:
        """Keep the transitions' windows and suspects that the job's submitter computed (read
        over the step's own); False when the job has no bisection."""
        with self._write() as conn:
            done = conn.execute(t.bisections.update().where(t.bisections.c.job_id == job_id)
                                .values(windows=windows, updated_at=time.time()))
            changed(conn, [job_id])
        return bool(done.rowcount)

    def stalled_bisections(self, before: float) -> list[str]:
        """Bisect jobs with finished runs their stored object has not seen, the newest finished
        before `before` (its worker died between storing the result and the step)."""
        runs = t.runs.c
        done = (sa.select(sa.func.count()).where(runs.job_id == t.bisections.c.job_id,
                                                 runs.state == RunState.DONE.value)
                .scalar_subquery())
        last = (sa.select(sa.func.max(runs.finished_at)).where(runs.job_id == t.bisections.c.job_id)
                .scalar_subquery())
        query = (sa.select(t.bisections.c.job_id).where(t.bisections.c.seen != done, last < before)
                 .order_by(t.bisections.c.job_id))
        with self.engine.connect() as conn:
            return list(conn.execute(query).scalars())

    def advance_bisection(self, job_id: str, step: BisectionStep) -> list[RunRow]:
        """Apply `step` to a bisect job and store what it adds (the job's environments follow),
        its bisect object and `seen`; the added runs (none: no bisection, or nothing new).

        The step judges runs (a regex oracle reads their text), so it runs on the job as read,
        outside every transaction; its update is stored under the bisections row's lock only
        if the job still has the runs it saw (compare and set), else the step runs again. A job
        still moving after ADVANCE_ATTEMPTS is left to its next finisher or the recovery sweep."""
        for _ in range(ADVANCE_ATTEMPTS):
            row = self.bisection(job_id)
            job = self.job(job_id) if row is not None else None
            if row is None or job is None:
                return []
            update = step(job, row)
            if not update.runs and (update.result, update.seen) == (row["result"], row["seen"]):
                return []  # nothing new: no write
            added = self._store_step(job_id, update, len(job.runs), sum(r.done for r in job.runs))
            if added is not None:
                return added
        return []

    def _store_step(self, job_id: str, update: BisectionUpdate, runs: int,
                    done: int) -> list[RunRow] | None:
        """Store a step's update if the job still has `runs` runs, `done` of them finished; the
        added runs, or None when the job moved on."""
        lock = (sa.select(t.bisections.c.job_id).where(t.bisections.c.job_id == job_id)
                .with_for_update())
        counts = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(sa.case(
            (t.runs.c.state == RunState.DONE.value, 1), else_=0)), 0)).where(
            t.runs.c.job_id == job_id)
        environments = sa.select(t.jobs.c.environments).where(t.jobs.c.id == job_id)
        with self._write() as conn:
            if conn.execute(lock).first() is None:
                return []
            if tuple(conn.execute(counts).one()) != (runs, done):
                return None
            if update.runs:
                conn.execute(t.runs.insert(), [run.columns() for run in update.runs])
            if update.environments != conn.execute(environments).scalar_one_or_none():
                conn.execute(t.jobs.update().where(t.jobs.c.id == job_id)
                             .values(environments=update.environments))
            conn.execute(t.bisections.update().where(t.bisections.c.job_id == job_id).values(
                result=update.result, seen=update.seen, updated_at=time.time()))
            changed(conn, [job_id])
        return update.runs
