"""The common part of a job's view (GET /api/v1/jobs/<id>): its runs, matrix, symbol traces
and likely duplicates; each kind's `read` adds its own answer and may adjust the status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tvmrepro.api.issues import KnownIssue
from tvmrepro.api.views import AttachedFile, JobView, RunView
from tvmrepro.choice import over_fields
from tvmrepro.jobs.matrix import build_matrix
from tvmrepro.jobs.tracker.known import likely_duplicates, result_bug_signature
from tvmrepro.lifecycle import JobStatus
from tvmrepro.liveness import token_host
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow, RunRow


def iso(seconds: float) -> str:
    """A time of the store (seconds since the epoch) as the API shows it."""
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def run_view(run: RunRow) -> RunView:
    """One stored run as the API shows it."""
    return RunView(id=run.id, variant=run.variant, environment=run.environment, state=run.state,
                   cached=run.cached, cached_from=run.result_id if run.cached else None,
                   deliveries=run.deliveries, result=run.result,
                   host=token_host(run.claimed_by),  # None before a claim, or from the cache
                   finished_at=iso(run.finished_at) if run.finished_at else None)


def duplicates_of(store: Store, job: JobRow) -> list[KnownIssue]:
    """The issues that a triage saw fail with a signature of this job's failures."""
    signatures = [found for run in job.runs
                  if (found := result_bug_signature(run.result)) is not None]
    known = store.known_issues_failing_with(signatures)
    return likely_duplicates(signatures, known, job.title)


def job_view(store: Store, job: JobRow, status: JobStatus, **answer: Any) -> JobView:
    """A job with its own runs, as the API shows it; `answer` is the kind's part (bisect=...)."""
    # Stored by the job's last finisher (tvmrepro.jobs.settling); one that died leaves them to
    # the recovery sweep, and until then the job reads without them.
    runs = [run_view(run) for run in job.runs]
    return JobView(
        id=job.id, kind=job.kind, title=job.title, status=status,
        created_at=iso(job.created_at), environments=job.environments,
        **over_fields(job.environments, job.environments_why),
        variants=job.variants, bypass_cache=job.bypass_cache,
        cached_runs=sum(run.cached for run in runs), runs=runs,
        matrix=build_matrix(job, job.comparisons), case=job.case,
        files=[AttachedFile.model_validate(entry) for entry in job.case.get("files") or []],
        symbols=job.symbols or [],  # made once, when the job's last run was stored
        likely_duplicates=duplicates_of(store, job), **answer)
