"""Runs that waited for a worker too long end as `infra_error` Expired, leaving the queue.

Settled by writers only: each worker's recovery sweep (worker/recovery.py, whatever the
environments it serves: the runs that expire are mostly those of environments no worker
serves) and each submission (before it counts the queue). A read of a job never settles
them: until a writer has, they read as still waiting.
"""

from __future__ import annotations

import time

from tvmrepro.jobs.settling import finish_run
from tvmrepro.results import Result, Status
from tvmrepro.settings import variable_name
from tvmrepro.store import Store
from tvmrepro.store.rows import RunRow


def expired_result(run: RunRow, expiry_s: float) -> Result:
    """What a run that waited longer than `expiry_s` ends with, saying what to do."""
    return Result(environment=run.environment, variant=run.variant,
                  status=Status.INFRA_ERROR, error_type="Expired", signature="Expired",
                  message=f"no worker took it within {expiry_s:g} s "
                          f"({variable_name('wait_expiry_s')}); submit it again when a worker "
                          f"serves {run.environment}")


def expire_waiting(store: Store, expiry_s: float, settle_jobs: bool = True) -> list[RunRow]:
    """End every run of the queue that has waited longer than `expiry_s`; the runs it ended
    (their messages are the caller's to drop: queue.drop_waiting_messages). Without
    `settle_jobs`, the jobs they finished are left for the caller to settle (the recovery sweep,
    whose thread heartbeats, hands them to a pool process)."""
    stale = store.waiting_since(time.time() - expiry_s)
    return [run for run in stale if finish_run(store, run.job_id, run.id,
                                               expired_result(run, expiry_s), settle_jobs)]
