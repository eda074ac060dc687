"""The reduce and extract kinds: one run each, stored and published with its narrowings row;
its answer read from that row (docs/contract.md, "Reduction"); the worker that takes the run
narrows it (worker/narrowing/run.py)."""

from __future__ import annotations

import uuid

from tvmrepro.api.requests import ExtractRequest, ReduceRequest
from tvmrepro.api.views import JobView
from tvmrepro.cases import Case
from tvmrepro.environments import Catalog, Environment
from tvmrepro.jobs.fanout import fan_out
from tvmrepro.jobs.kind import Kind
from tvmrepro.jobs.matrix import job_status
from tvmrepro.jobs.narrow import EXTRACT, REDUCE
from tvmrepro.jobs.narrow.logic import NarrowOptions, make_options
from tvmrepro.jobs.narrow.report import render_extract, render_reduce
from tvmrepro.jobs.narrow.steps import current, start
from tvmrepro.jobs.submission import Submission
from tvmrepro.jobs.views import job_view
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow


def start_reduce(sub: Submission, request: ReduceRequest) -> str:
    """Store a reduce job with its one run and publish it; its id (QueueFull: nothing
    stored)."""
    case = sub.case(request)
    envs = sub.environments(request.environments)
    options = make_options(REDUCE, case, envs, request.variant, request.oracle,
                           request.budget_s)
    return start_narrowing(sub, request, case, envs, options)


def start_extract(sub: Submission, request: ExtractRequest) -> str:
    """Store an extract job with its one run and publish it; its id (QueueFull: nothing
    stored)."""
    case = sub.case(request)
    envs = sub.environments(request.environments)
    options = make_options(EXTRACT, case, envs, at=request.at)
    return start_narrowing(sub, request, case, envs, options)


def start_narrowing(sub: Submission, request: ReduceRequest | ExtractRequest, case: Case,
                    envs: list[Environment], options: NarrowOptions) -> str:
    """The reduce or extract job of these options, with its one run, stored and published;
    its id."""
    fan_out(case, envs, sub.store.fingerprints(), [options.variant], "variant", "case")
    sub.check_served(envs, request)
    job = JobRow(id=uuid.uuid4().hex, kind=options.kind, title=case.title,
                 case=case.model_dump(mode="json", exclude_defaults=True),
                 environments=[options.environment], variants=[options.variant],
                 bypass_cache=True, created_at=sub.now)
    sub.publish([start(sub.store, job, case, options, sub.cap, sub.now)])
    return job.id


def read(store: Store, job: JobRow) -> JobView:
    """A reduce or extract job's view with its answer so far."""
    status = job_status(job.runs, settled=job.comparisons is not None)
    reduce, extract = current(store, job, status)
    return job_view(store, job, status, reduce=reduce, extract=extract)


def section(job: JobView, catalog: Catalog) -> list[str]:
    """The reduction's or the extraction's section of the job's report."""
    return render_reduce(job.reduce, job.case) + render_extract(job.extract)


REDUCE_KIND = Kind(
    name=REDUCE, start=start_reduce, read=read, cli="cli.commands.narrowing:wait_narrowing",
    report=section, narrowing=True)
EXTRACT_KIND = Kind(
    name=EXTRACT, start=start_extract, read=read,
    cli="cli.commands.narrowing:wait_narrowing", report=section, narrowing=True)
