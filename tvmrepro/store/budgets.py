"""A submitter's share of the store (tvmrepro.submitters): the jobs being admitted stamped with
their submitter and what they store, and that submitter's waiting runs and stored bytes counted
against its budget, inside the admission's transaction (Store.submit_jobs)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tvmrepro.lifecycle import RunState
from tvmrepro.settings import variable_name
from tvmrepro.store import schema as t
from tvmrepro.store.rows import JobRow, RunRow
from tvmrepro.submitters import Admission, Budget


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def stamped(jobs: list[tuple[JobRow, list[RunRow]]], admission: Admission,
            parts: Mapping[str, list[Any]] | None) -> list[tuple[JobRow, list[RunRow]]]:
    """The jobs with their submitter; the first (the one submitted: a triage's or sweep's run
    jobs follow it) with what they all store, at least the request's size."""
    rows = sum(_size(row.report) for found in (parts or {}).values() for row in found)
    stored = max(admission.request_bytes, rows + sum(_size(job.case) for job, _ in jobs))
    return [(job.model_copy(update={"submitter": admission.submitter,
                                    "stored_bytes": stored if index == 0 else 0}), runs)
            for index, (job, runs) in enumerate(jobs)]


def _runs_past(conn: Connection, jobs: list[tuple[JobRow, list[RunRow]]], submitter: str,
               budget: Budget) -> str | None:
    new = Counter(run.environment for _, runs in jobs for run in runs
                  if run.state == RunState.QUEUED)
    if not new:
        return None
    query = (sa.select(t.runs.c.environment, sa.func.count())
             .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
             .where(t.jobs.c.submitter == submitter, t.runs.c.state == RunState.QUEUED.value,
                    t.runs.c.environment.in_(sorted(new)))
             .group_by(t.runs.c.environment))
    waiting = {env_id: int(n) for env_id, n in conn.execute(query)}
    for env_id, count in sorted(new.items()):
        if waiting.get(env_id, 0) + count > budget.runs:
            return (f"submitter {submitter} has {waiting.get(env_id, 0)} runs waiting for "
                    f"{env_id} and asks for {count} more: past its budget of {budget.runs} "
                    f"waiting runs per environment ({variable_name('max_submitter_runs')}); "
                    "retry once some have run")
    return None


def _bytes_past(conn: Connection, adding: int, submitter: str, budget: Budget) -> str | None:
    since = time.time() - budget.window_s
    query = (sa.select(sa.func.coalesce(sa.func.sum(t.jobs.c.stored_bytes), 0))
             .where(t.jobs.c.submitter == submitter, t.jobs.c.created_at >= since))
    stored = int(conn.execute(query).scalar_one())
    if stored + adding <= budget.stored_bytes:
        return None
    return (f"submitter {submitter} stored {stored} bytes in the last "
            f"{budget.window_s / 3600:g} h and this job would add {adding}: past its budget of "
            f"{budget.stored_bytes} bytes ({variable_name('max_submitter_bytes')}); retry later")


def past_budget(conn: Connection, jobs: list[tuple[JobRow, list[RunRow]]], submitter: str,
                budget: Budget) -> str | None:
    """Why admitting `jobs` (stamped) takes the submitter past `budget`: its waiting runs on
    an environment (the new ones counted), or its bytes stored in the window (the new job's
    counted); None while within it."""
    return (_runs_past(conn, jobs, submitter, budget)
            or _bytes_past(conn, jobs[0][0].stored_bytes or 0, submitter, budget))
