"""Bisect jobs on the API's side: validate one, start it, read its bisect object."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from tvmrepro.bisect_jobs import current, start
from tvmrepro.bisection import DEFAULT_ORACLE, Options, make_options
from tvmrepro.cases import Case
from tvmrepro.environments import Catalog, Environment
from tvmrepro.errors import BadInput
from tvmrepro.lifecycle import JobStatus
from tvmrepro.models import Bisection, JobRequest
from tvmrepro.rows import JobRow, RunRow
from tvmrepro.store import Store

BISECT_ONLY = ("variant", "oracle", "reference", "repeat", "strategy")
Publish = Callable[[list[RunRow]], None]


def refuse_bisect_fields(request: JobRequest) -> None:
    """A run job given a bisect job's field: BadInput naming it."""
    for name in BISECT_ONLY:
        if name in request.model_fields_set:
            raise BadInput(name, "only a bisect job takes it (kind: 'bisect')")


def bisect_options(request: JobRequest, case: Case, envs: list[Environment],
                   catalog: Catalog) -> Options:
    """The options of a bisect job, each checked; BadInput names the wrong field."""
    if request.reference is not None:
        catalog.get(request.reference, "reference")
    return make_options(case, envs, request.variant, request.oracle or DEFAULT_ORACLE,
                        request.reference, request.repeat, request.strategy, request.bypass_cache)


def start_bisect(store: Store, catalog: Catalog, publish: Publish, case: Case,
                 options: Options, cap: int, now: float) -> str:
    """Store and publish a bisect job's first probes; its id (QueueFull: nothing stored)."""
    if options.repeat > cap:  # the cap is per environment: a probe's repeats share one
        raise BadInput("repeat", f"the bisection makes up to {options.repeat} runs on each "
                                 f"environment; this service queues at most {cap} per "
                                 f"environment")
    job = JobRow(id=uuid.uuid4().hex, kind="bisect", title=case.title,
                 case=case.model_dump(mode="json", exclude_defaults=True),
                 environments=options.environments, variants=[options.variant],
                 bypass_cache=options.bypass_cache, created_at=now)
    publish(start(store, job, case, options, catalog, cap))
    return job.id


def read_bisect(store: Store, job: JobRow) -> Bisection | None:
    """The job's bisect object as its last step stored it (None: no step stored one yet)."""
    return current(store, job)


def bisect_status(status: JobStatus, bisect: Bisection | None) -> JobStatus:
    """A bisection with probes still to plan is running, even when every run so far is done."""
    if bisect is not None and not bisect.finished and status.finished:
        return JobStatus.RUNNING
    return status
