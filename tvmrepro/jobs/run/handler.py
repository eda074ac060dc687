"""The run kind: one run per variant and environment, from the cache where it can."""

from __future__ import annotations

import uuid

from tvmrepro.api.requests import RunRequest
from tvmrepro.api.views import JobView
from tvmrepro.errors import BadInput
from tvmrepro.jobs.fanout import fan_out
from tvmrepro.jobs.kind import Kind
from tvmrepro.jobs.matrix import job_status
from tvmrepro.jobs.run import RUN
from tvmrepro.jobs.settling import submit
from tvmrepro.jobs.submission import Submission
from tvmrepro.jobs.tracker.steps import after_part_run
from tvmrepro.jobs.views import job_view
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow


def start(sub: Submission, request: RunRequest) -> str:
    """Store a run job with its runs and publish those that wait for a worker; its id."""
    case = sub.case(request)
    chosen = sub.choose(request)
    envs = chosen.environments
    planned = fan_out(case, envs, sub.store.fingerprints(), request.variants, case_field="case")
    variants = list(dict.fromkeys(run.variant for run in planned))
    sub.check_served(envs, request)
    if len(variants) > sub.cap:  # the cap is per environment
        raise BadInput("variants", f"the job makes {len(variants)} runs on each "
                       f"environment; this service queues at most {sub.cap} per environment")
    job = JobRow(id=uuid.uuid4().hex, kind=RUN, title=case.title,
                 case=case.model_dump(mode="json", exclude_defaults=True),
                 environments=[env.id for env in envs], variants=variants,
                 bypass_cache=request.bypass_cache, created_at=sub.now,
                 environments_why=chosen.why)
    runs = sub.runs(job.id, case, planned, request.bypass_cache)
    submit(sub.store, job, runs, sub.cap)
    sub.published(runs)
    return job.id


def read(store: Store, job: JobRow) -> JobView:
    """A run job's view: running until its comparisons are stored after its last run."""
    return job_view(store, job, job_status(job.runs, settled=job.comparisons is not None))


RUN_KIND = Kind(
    name=RUN, start=start, read=read, cli="cli.commands.run:finish_run",
    # A run job may be a part of a triage: its last run records what the triage saw.
    after_run=after_part_run)
