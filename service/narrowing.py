"""Reduce and extract jobs on the API's side: check one, start it, read its answer."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from tvmrepro.cases import Case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.lifecycle import JobStatus
from tvmrepro.models import JobRequest
from tvmrepro.narrowed import Extraction, Reduction
from tvmrepro.narrowing import NarrowOptions, make_options
from tvmrepro.narrowing_jobs import current, start
from tvmrepro.rows import JobRow, RunRow
from tvmrepro.store import Store

# The fields only some kinds take; a job of another kind given one is told which kinds do
# (a bisect job given `variants` is told by its own check).
KIND_FIELDS = {"variant": ("bisect", "reduce"), "oracle": ("bisect", "reduce"),
               "reference": ("bisect",), "repeat": ("bisect",), "strategy": ("bisect",),
               "budget_s": ("reduce",), "at": ("extract",), "variants": ("run", "bisect"),
               "reports": ("triage",), "case": ("run", "bisect", "reduce", "extract"),
               "env": ("sweep",), "since": ("sweep",),
               "environments": ("run", "bisect", "reduce", "extract", "triage")}
Publish = Callable[[list[RunRow]], None]


def refuse_other_kinds_fields(request: JobRequest) -> None:
    """A field that the job's kind does not take: BadInput naming it and the kinds that do."""
    for name, kinds in KIND_FIELDS.items():
        if name in request.model_fields_set and request.kind not in kinds:
            raise BadInput(name, f"a {request.kind} job does not take it (only "
                                 f"{' and '.join(repr(k) for k in kinds)} jobs do)")


def narrow_options(request: JobRequest, case: Case, envs: list[Environment]) -> NarrowOptions:
    """The options of a reduce or extract job, each checked; BadInput names the wrong field."""
    return make_options(request.kind, case, envs, request.variant, request.oracle,
                        request.budget_s, request.at)


def start_narrowing(store: Store, publish: Publish, case: Case, options: NarrowOptions,
                    cap: int, now: float) -> str:
    """Store and publish a reduce or extract job's one run; its id (QueueFull: nothing stored)."""
    job = JobRow(id=uuid.uuid4().hex, kind=options.kind, title=case.title,
                 case=case.model_dump(mode="json", exclude_defaults=True),
                 environments=[options.environment], variants=[options.variant],
                 bypass_cache=True, created_at=now)
    publish([start(store, job, case, options, cap, now)])
    return job.id


def read_narrowing(store: Store, job: JobRow,
                   status: JobStatus) -> tuple[Reduction | None, Extraction | None]:
    """The job's `reduce` and `extract` objects (None, None for a run or bisect job)."""
    if job.kind not in ("reduce", "extract"):
        return None, None  # no query for the other kinds
    return current(store, job, status)
