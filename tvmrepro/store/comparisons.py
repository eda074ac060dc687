"""The comparisons rows of the job store: a finished job's comparisons and symbol traces, made
once by the job layer (tvmrepro.jobs.settling) and kept here with the number of runs they were
made from (fewer than the job has now: stale, not shown)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from tvmrepro.lifecycle import RunState
from tvmrepro.store import schema as t
from tvmrepro.store.artifacts import Artifacts
from tvmrepro.store.base import StoreBase, changed

# A finished job's comparisons and symbol traces, as made by the job layer.
Compared = tuple[Sequence[BaseModel], Sequence[BaseModel]]


def insert_comparisons(conn: Connection, artifacts: Artifacts, job_id: str, found: Compared,
                       runs: int) -> None:
    """Write a finished job's comparisons and symbol traces (inside the caller's transaction;
    large ones in the artifact store, the row keeping {})."""
    comparisons, symbols = found
    data, ref = artifacts.spill_json({
        "comparisons": [comparison.model_dump(mode="json") for comparison in comparisons],
        "symbols": [trace.model_dump(mode="json") for trace in symbols]}, {})
    conn.execute(t.comparisons.insert().values(job_id=job_id, data=data, data_ref=ref,
                                               runs=runs, created_at=time.time()))


class ComparisonRows(StoreBase):
    """The comparisons table (part of `Store`)."""

    def store_comparisons(self, job_id: str, found: Compared, runs: int,
                          replace: bool = False) -> None:
        """Store a finished job's comparisons and symbol traces, made from `runs` runs, unless
        another finisher stored them first; those made from fewer runs (and, with `replace`,
        any) are dropped first."""
        lock = sa.select(t.jobs.c.id).where(t.jobs.c.id == job_id).with_for_update()
        stale = sa.true() if replace else t.comparisons.c.runs < runs
        with self._write() as conn:
            conn.execute(lock)  # finishers of one job's last runs store them one at a time
            conn.execute(t.comparisons.delete().where(t.comparisons.c.job_id == job_id, stale))
            if conn.execute(sa.select(t.comparisons.c.job_id)
                            .where(t.comparisons.c.job_id == job_id)).first() is None:
                insert_comparisons(conn, self.artifacts, job_id, found, runs)
            changed(conn, [job_id])

    def jobs_of_results(self, result_ids: set[str], other_than: str) -> dict[str, str]:
        """Result id -> the job of the run that made it, for those made by another job."""
        query = sa.select(t.runs.c.id, t.runs.c.job_id).where(t.runs.c.id.in_(result_ids),
                                                              t.runs.c.job_id != other_than)
        with self.engine.connect() as conn:
            return {run_id: job_id for run_id, job_id in conn.execute(query)}

    def unsettled_jobs(self, since: float, until: float) -> list[str]:
        """Jobs whose runs are all done, the last finished in [since, until), that have no
        comparisons made from as many runs (the recovery sweep settles them)."""
        done = sa.func.sum(sa.case((t.runs.c.state == RunState.DONE.value, 1), else_=0))
        last = sa.func.max(t.runs.c.finished_at)
        query = (sa.select(t.runs.c.job_id, sa.func.count(), t.comparisons.c.runs)
                 .outerjoin(t.comparisons, t.comparisons.c.job_id == t.runs.c.job_id)
                 .group_by(t.runs.c.job_id, t.comparisons.c.runs)
                 .having(done == sa.func.count(), last >= since, last < until)
                 .order_by(t.runs.c.job_id))
        with self.engine.connect() as conn:
            return [job_id for job_id, runs, compared in conn.execute(query)
                    if compared != runs]
