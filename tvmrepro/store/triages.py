"""The triage_reports rows of the job store: a triage job's reports in order, each with the run
job its script became. The runs themselves are those run jobs' (queued, cached, recovered and
stored as every run is); a triage job is read by joining them here."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from tvmrepro.lifecycle import RunState
from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase
from tvmrepro.store.results import run_row, with_result
from tvmrepro.store.rows import RunRow


class TriageReportRow(BaseModel):
    """One report of a triage job: the report as imported, and its run job (None: no code)."""

    ordinal: int
    report: dict[str, Any]
    run_job: str | None


def insert_triage_reports(conn: Connection, job_id: str, rows: list[TriageReportRow]) -> None:
    """Write a triage job's reports (inside the transaction that stores the job)."""
    if rows:
        conn.execute(t.triage_reports.insert(),
                     [{"job_id": job_id, **row.model_dump()} for row in rows])


def run_jobs_of_triages() -> sa.Select[tuple[str]]:
    """The ids of every triage's run jobs (the job list shows them under their triage)."""
    return sa.select(t.triage_reports.c.run_job).where(t.triage_reports.c.run_job.is_not(None))


class TriageRows(StoreBase):
    """The triage_reports table (part of `Store`)."""

    def triage_reports(self, job_id: str) -> list[TriageReportRow]:
        """A triage job's reports in order (none: not a triage job)."""
        query = (sa.select(t.triage_reports.c.ordinal, t.triage_reports.c.report,
                           t.triage_reports.c.run_job)
                 .where(t.triage_reports.c.job_id == job_id).order_by(t.triage_reports.c.ordinal))
        with self.engine.connect() as conn:
            return [TriageReportRow.model_validate(dict(r)) for r in conn.execute(query).mappings()]

    def triage_run_jobs(self, job_id: str) -> list[str]:
        """The run jobs of a triage job's reports, in order (those with code)."""
        return [row.run_job for row in self.triage_reports(job_id) if row.run_job is not None]

    def triage_run_counts(self, job_id: str) -> dict[str, int]:
        """How many runs a triage job's run jobs have ("runs"), and how many are done ("done")."""
        done = sa.func.sum(sa.case((t.runs.c.state == RunState.DONE.value, 1), else_=0))
        query = (sa.select(sa.func.count(t.runs.c.id), done)
                 .join(t.triage_reports, t.triage_reports.c.run_job == t.runs.c.job_id)
                 .where(t.triage_reports.c.job_id == job_id))
        with self.engine.connect() as conn:
            runs, finished = conn.execute(query).one()
        return {"runs": int(runs), "done": int(finished or 0)}

    def parts_stamp(self, job_id: str) -> tuple[int, int, int, int]:
        """What changes whenever a triage's or sweep's view may (one aggregate query, no
        result read): its parts, its runs, those done and those still waiting. A run's result
        never changes once it is done, so the view is the same while these are."""
        done = sa.func.sum(sa.case((t.runs.c.state == RunState.DONE.value, 1), else_=0))
        queued = sa.func.sum(sa.case((t.runs.c.state == RunState.QUEUED.value, 1), else_=0))
        query = (sa.select(sa.func.count(t.runs.c.id), done, queued)
                 .join(t.triage_reports, t.triage_reports.c.run_job == t.runs.c.job_id)
                 .where(t.triage_reports.c.job_id == job_id))
        parts = (sa.select(sa.func.count()).select_from(t.triage_reports)
                 .where(t.triage_reports.c.job_id == job_id))
        with self.engine.connect() as conn:
            runs, finished, waiting = conn.execute(query).one()
            count = conn.execute(parts).scalar_one()
        return int(count), int(runs), int(finished or 0), int(waiting or 0)

    def triage_of(self, run_job: str) -> str | None:
        """The triage job that a run job belongs to (None: a job of its own)."""
        query = sa.select(t.triage_reports.c.job_id).where(t.triage_reports.c.run_job == run_job)
        with self.engine.connect() as conn:
            found: str | None = conn.execute(query.limit(1)).scalar_one_or_none()
        return found

    def runs_of_jobs(self, job_ids: list[str], results: bool = True) -> dict[str, list[RunRow]]:
        """Job id -> its runs in order (each with its result's summary unless not `results`),
        in one query."""
        found: dict[str, list[RunRow]] = {job_id: [] for job_id in job_ids}
        if not job_ids:
            return found
        query = (sa.select(t.runs, *with_result())
                 .outerjoin(t.results, t.results.c.run_id == t.runs.c.result_id)
                 if results else sa.select(t.runs))
        query = (query.where(t.runs.c.job_id.in_(job_ids))
                 .order_by(t.runs.c.job_id, t.runs.c.ordinal))
        with self.engine.connect() as conn:
            for row in conn.execute(query).mappings():
                found[row["job_id"]].append(run_row(self.artifacts, row))
        return found
