"""The bisect kind: its first probes stored and published, its bisect object read as its last
step stored it, its next step taken after each of its runs (docs/contract.md, "Bisection")."""

from __future__ import annotations

import uuid

from tvmrepro.api.requests import BisectRequest
from tvmrepro.api.views import Bisection, JobView
from tvmrepro.cases import Case
from tvmrepro.choice import NAMED_WHY, SERVED_WHY
from tvmrepro.environments import Catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.bisect import BISECT
from tvmrepro.jobs.bisect.logic import DEFAULT_ORACLE, Options, make_options
from tvmrepro.jobs.bisect.report import render_bisect
from tvmrepro.jobs.bisect.steps import after_run, current, start
from tvmrepro.jobs.fanout import fan_out
from tvmrepro.jobs.kind import Kind
from tvmrepro.jobs.matrix import job_status
from tvmrepro.jobs.submission import Submission
from tvmrepro.jobs.views import job_view
from tvmrepro.lifecycle import JobStatus
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow


def options_of(sub: Submission, request: BisectRequest) -> tuple[Case, Options]:
    """The case and the bisection a request asks for, each option checked; BadInput names the
    wrong field."""
    case = sub.case(request)
    envs = sub.environments(request.environments)
    if request.reference is not None:
        sub.catalog.get(request.reference, "reference")
    options = make_options(case, envs, request.variant, request.oracle or DEFAULT_ORACLE,
                           request.reference, request.repeat, request.strategy,
                           request.bypass_cache)
    fan_out(case, envs, sub.store.fingerprints(), [options.variant], "variant", "case")
    sub.check_served(envs, request)
    if options.repeat > sub.cap:  # the cap is per environment: a probe's repeats share one
        raise BadInput("repeat", f"the bisection makes up to {options.repeat} runs on each "
                                 f"environment; this service queues at most {sub.cap} per "
                                 f"environment")
    return case, options


def range_why(request: BisectRequest) -> str:
    """Why a bisection's range is what it is: named, or every release a live worker serves."""
    return NAMED_WHY if isinstance(request.environments, list) else SERVED_WHY


def start_bisect(sub: Submission, request: BisectRequest) -> str:
    """Store a bisect job with its first probes and publish them; its id (QueueFull: nothing
    stored)."""
    case, options = options_of(sub, request)
    job = JobRow(id=uuid.uuid4().hex, kind=BISECT, title=case.title,
                 case=case.model_dump(mode="json", exclude_defaults=True),
                 environments=options.environments, variants=[options.variant],
                 bypass_cache=options.bypass_cache, created_at=sub.now,
                 environments_why=range_why(request))
    sub.publish(start(sub.store, job, case, options, sub.catalog, sub.cap))
    return job.id


def bisect_status(status: JobStatus, bisect: Bisection | None) -> JobStatus:
    """A bisection with probes still to plan is running, even when every run so far is done."""
    if bisect is not None and not bisect.finished and status.finished:
        return JobStatus.RUNNING
    return status


def read(store: Store, job: JobRow) -> JobView:
    """A bisect job's view with its bisect object as its last step stored it."""
    bisect = current(store, job)
    status = job_status(job.runs, settled=job.comparisons is not None)
    return job_view(store, job, bisect_status(status, bisect), bisect=bisect)


def section(job: JobView, catalog: Catalog) -> list[str]:
    """The bisect section of the job's report."""
    return render_bisect(job.bisect, job.runs, job.case, catalog)


BISECT_KIND = Kind(
    name=BISECT, start=start_bisect, read=read, cli="cli.commands.bisect:wait_bisect",
    after_run=after_run, report=section)
