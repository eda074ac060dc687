"""After a run of a bisect job is stored: advance the bisection and publish its next probes."""

from __future__ import annotations

import logging

from celery import Celery

from tvmrepro.bisect_jobs import advance
from tvmrepro.environments import default_catalog
from tvmrepro.queue import publish_run
from tvmrepro.settling import settle
from tvmrepro.store import Store

log = logging.getLogger(__name__)


def after_run(app: Celery, store: Store, job_id: str) -> None:
    """Advance the job's bisection, if it is a bisect job, and publish the runs it added."""
    try:
        waiting = advance(store, job_id, default_catalog())
        for run in waiting:
            publish_run(app, run.id, run.environment, run.timeout_s)
        if not waiting:
            # The step's probes (if any) all came from the cache: no finisher will settle the
            # job's comparisons for them, and it reads running until they are stored.
            settle(store, job_id)
    except Exception:
        # The run's result is stored; the recovery sweep takes the step (and publishes runs
        # stored but not published).
        log.exception("advancing the bisection of job %s failed", job_id)
