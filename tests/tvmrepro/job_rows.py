"""Job and run rows as JobService makes them, and the results that finish them (no TVM)."""

from __future__ import annotations

import time
import uuid

from tvmrepro.lifecycle import RunState
from tvmrepro.results import Result, Status
from tvmrepro.store.rows import JobRow, RunRow

CAP = 30


def new_job(runs: int, state: RunState = RunState.QUEUED,
            key: str = "k") -> tuple[JobRow, list[RunRow]]:
    """A job row and its run rows, as JobService makes them."""
    job_id, now = uuid.uuid4().hex, time.time()
    job = JobRow(id=job_id, kind="run", case={"script": "pass"}, environments=["e"],
                 variants=["script"], created_at=now)
    rows = [RunRow(id=uuid.uuid4().hex, job_id=job_id, ordinal=n, variant="script",
                   environment="e", state=state, cache_key=key, timeout_s=60, created_at=now,
                   published_at=now) for n in range(runs)]
    return job, rows


def result(status: Status = Status.OK) -> Result:
    """A small result with one pass."""
    return Result.model_validate({
        "environment": "e", "variant": "script", "status": status, "stage": "script",
        "passes": [{"index": 0, "name": "P", "seconds": 0.1, "functions": [], "ir": "# ir"}],
        "log": {"stdout": "out", "stderr": "err"}})


def never_gone(_claimer: str) -> bool:
    """No claimer is ever dead."""
    return False


def two_variant_job() -> tuple[JobRow, list[RunRow]]:
    """A job of two variants in one environment, both waiting."""
    job, runs = new_job(2)
    job = job.model_copy(update={"variants": ["once", "twice"]})
    runs = [run.model_copy(update={"variant": variant}) for run, variant in
            zip(runs, ["once", "twice"], strict=True)]
    return job, runs
