"""Finished run jobs of given results in a store, read back as the service shows them."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from tvmrepro.api.views import JobView
from tvmrepro.cases import Case
from tvmrepro.environments import default_catalog
from tvmrepro.jobs.settling import finish_run
from tvmrepro.lifecycle import RunState, cache_key
from tvmrepro.queue import make_celery
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow, RunRow


def stored_job(store: Store, case: Case, results: list[Result]) -> str:
    """A finished run job of `case` in `store` whose runs gave `results` (none: a job whose
    runs never came, of every variant of the case); its id."""
    job_id, now = uuid.uuid4().hex, time.time()
    catalog = default_catalog()
    runs = [RunRow(id=uuid.uuid4().hex, job_id=job_id, ordinal=i, variant=r.variant,
                   environment=r.environment, state=RunState.QUEUED,
                   cache_key=cache_key(case, r.variant, catalog.get(r.environment)),
                   timeout_s=case.timeout_s, created_at=now) for i, r in enumerate(results)]
    store.submit(JobRow(id=job_id, kind="run", title=case.title, case=case.model_dump(mode="json"),
                        environments=list(dict.fromkeys(r.environment for r in results)),
                        variants=list(dict.fromkeys(r.variant for r in results))
                        or case.variant_names,
                        created_at=now), runs, cap=100)
    for run, result in zip(runs, results, strict=True):
        assert finish_run(store, job_id, run.id, result)
    return job_id


def job_view(home: Path, store: Store, job_id: str) -> JobView:
    """The job as GET /api/v1/jobs/<id> answers it."""
    from service.jobs import JobService

    settings = Settings.from_env({"TVMREPRO_HOME": str(home)})
    view = JobService(settings, store, make_celery(settings)).job(job_id)
    assert view is not None
    return view
