"""A reduce or extract job in the store: its one run, and its narrowings row.

The API stores the job, its row (the options) and its one run in one go; the
worker that takes the run writes the row's progress (with the best case so
far) as it goes, then the answer or the reason there is none, and only then
the run's result: a job whose run is done has its answer. Both sides call
this module.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, cast

from tvmrepro.cases import Case
from tvmrepro.jobs.narrow.logic import (
    Extraction,
    NarrowingRow,
    NarrowOptions,
    NarrowState,
    Reduction,
    StoredProgress,
    answer,
)
from tvmrepro.lifecycle import JobStatus, RunState
from tvmrepro.store import QueueFull, Store
from tvmrepro.store.rows import JobRow, RunRow


def narrowing(store: Store, job_id: str) -> NarrowingRow | None:
    """A reduce or extract job's row (options, progress, result, error), or None."""
    row = store.narrowing(job_id)
    if row is None:
        return None
    return NarrowingRow(options=NarrowOptions(**row.options),
                        progress=cast("StoredProgress | None", row.progress),
                        result=row.result, error=row.error)


def start(store: Store, job: JobRow, case: Case, options: NarrowOptions, cap: int,
          now: float) -> RunRow:
    """Store the job, its row and its one run (queued); QueueFull stores nothing."""
    run = RunRow(id=uuid.uuid4().hex, job_id=job.id, ordinal=0, variant=options.variant,
                 environment=options.environment, state=RunState.QUEUED,
                 cache_key=f"{options.kind}:{job.id}",  # never served from, nor serving, the cache
                 timeout_s=options.run_timeout_s(case), created_at=now)  # held until released
    store.add_narrowing(job.id, options.kind, dataclasses.asdict(options), now)
    try:
        store.submit(job, [run], cap)
    except QueueFull:
        store.drop_narrowing(job.id)
        raise
    return run


def save_progress(store: Store, job_id: str, progress: StoredProgress) -> None:
    """Record how far the narrowing got (and its best case so far, under "best")."""
    store.save_narrowing_progress(job_id, progress)


def save_answer(store: Store, job_id: str, result: dict[str, Any] | None,
                error: str | None = None) -> None:
    """Record the answer, or why there is none."""
    store.save_narrowing_answer(job_id, result, error)


def _state(status: JobStatus, row: NarrowingRow) -> NarrowState:
    if status is JobStatus.DONE and row.result is None:
        # Why there is no answer is in `error`, or the run ended without its worker storing
        # one (cancelled, or lost too often): the run's result says which.
        return "failed"
    return status.value  # the same four words


def current(store: Store, job: JobRow, status: JobStatus
            ) -> tuple[Reduction | None, Extraction | None]:
    """A narrowing job's `reduce` and `extract` objects (both None for other jobs)."""
    row = narrowing(store, job.id)
    if row is None:
        return None, None
    found = answer(row, _state(status, row))
    if isinstance(found, Reduction):
        return found, None
    return None, found
