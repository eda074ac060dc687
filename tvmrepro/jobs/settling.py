"""A finished job's comparisons and symbol traces: made once, by whoever finished it.

The store only keeps them (`Store.store_comparisons`); they are made here, outside every
transaction, after the run that completes a job is stored (`finish_run`: the worker, the
recovery sweep's expiry, a cancellation), or in the submission's own transaction for a job
whose every run came from the cache (`submit_jobs`). A finisher that dies or fails in
between leaves its job to the recovery sweep (`settle_finished`); a read never makes them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from tvmrepro.api.traced import SymbolTrace
from tvmrepro.api.views import Comparison
from tvmrepro.jobs.comparisons import job_comparisons, job_pairs, reusable
from tvmrepro.jobs.symbols import symbol_traces
from tvmrepro.results import Result
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow, RunRow
from tvmrepro.store.triages import TriageReportRow

log = logging.getLogger(__name__)
Settled = tuple[list[Comparison], list[SymbolTrace]]  # what a finished job stores once


def comparisons_of(store: Store, job: JobRow) -> list[Comparison]:
    """A job's comparisons: those its results' own jobs stored reused, the others diffed."""
    pairs = job_pairs(job)
    if not pairs:
        return []
    made_by = store.jobs_of_results({result_id for _, a, _, b in pairs for result_id in (a, b)},
                                    job.id)
    # A result id is the id of the run that made it: that run's job compared the pair.
    sources = {made_by[a] for _, a, _, b in pairs
               if a in made_by and made_by.get(b) == made_by[a]}
    jobs = [source for job_id in sorted(sources) if (source := store.job(job_id, False))]
    return job_comparisons(job, store.passes, reusable(jobs))


def compared(store: Store, job: JobRow) -> Settled:
    """A finished job's comparisons and symbol traces, made from its stored results."""
    source = job.case.get("source") or job.case.get("script") or ""
    symbols = symbol_traces([{"variant": run.variant, "environment": run.environment,
                              **(run.result or {})} for run in job.runs], source)
    return comparisons_of(store, job), symbols


def submit_jobs(store: Store, jobs: list[tuple[JobRow, list[RunRow]]], cap: int,
                triage_reports: Mapping[str, list[TriageReportRow]] | None = None) -> None:
    """`Store.submit_jobs`, a job whose every run came from the cache stored finished with
    its comparisons (in the same transaction: nobody else would ever make them)."""
    settled = {job.id: compared(store, job.model_copy(update={"runs": runs}))
               for job, runs in jobs if runs and all(run.done for run in runs)}
    store.submit_jobs(jobs, cap, triage_reports, settled)


def submit(store: Store, job: JobRow, runs: list[RunRow], cap: int) -> None:
    """One job and its runs (`submit_jobs`); QueueFull stores nothing."""
    submit_jobs(store, [(job, runs)], cap)


def settle(store: Store, job_id: str) -> Settled | None:
    """A finished job's comparisons and symbol traces: stored ones, else made once and
    stored (None: the job is unknown or not finished)."""
    if store.unfinished_count(job_id):  # every finish asks: answered without reading runs
        return None
    job = store.job(job_id)
    if job is None or not job.finished:
        return None
    if job.comparisons is not None and job.symbols is not None:
        return job.comparisons, job.symbols
    found = compared(store, job)
    # All of a stored row replaced when an older version stored it without symbols.
    store.store_comparisons(job_id, found, len(job.runs), replace=job.comparisons is not None)
    return found


def settle_quietly(store: Store, job_id: str) -> None:
    """`settle`, a failure logged: the run's result is stored, the recovery sweep retries."""
    try:
        settle(store, job_id)
    except Exception:
        log.exception("comparing the runs of job %s failed; the recovery sweep compares them",
                      job_id)


def finish_run(store: Store, job_id: str, run_id: str, result: Result,
               settle_job: bool = True) -> bool:
    """Store a run's result (`Store.finish`) and, if that finished its job, settle the job
    (after the commit: no diff is made while holding the write lock; not with `settle_job`
    False: the caller has it settled elsewhere). True when stored."""
    if not store.finish(run_id, result):
        return False
    if settle_job:
        settle_quietly(store, job_id)
    return True


def settle_finished(store: Store, since: float, until: float) -> int:
    """Settle every job whose last run finished in [since, until) and has no comparisons for
    its runs (its finisher died or failed before it settled it); how many it settled."""
    job_ids = store.unsettled_jobs(since, until)
    for job_id in job_ids:
        settle_quietly(store, job_id)
    return len(job_ids)
