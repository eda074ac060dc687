"""A triage (or sweep) job in the store: its answer read from its run jobs' runs, and the known
issues a finished triage keeps. The API reads it; the worker that stores a triage's last run records what
it saw (so that a job failing with a report's signature names that issue). Both call this."""

from __future__ import annotations

import logging

from tvmrepro.lifecycle import JobKind
from tvmrepro.rows import JobRow, RunRow
from tvmrepro.store import Store
from tvmrepro.tracker.importing import ImportedReport
from tvmrepro.tracker.known import known_issues
from tvmrepro.tracker.sweep import StoredCase, SweepJobAnswer, sweep_job_answer
from tvmrepro.tracker.triage import TriageAnswer, Verdict
from tvmrepro.tracker.triage_job import TriageJobAnswer, triage_job_answer

log = logging.getLogger(__name__)


def read_triage(store: Store, job: JobRow) -> TriageJobAnswer:
    """A triage job's answer over the reports whose runs are all done, and its progress."""
    rows = store.triage_reports(job.id)
    jobs = [row.run_job for row in rows]
    runs = store.runs_of_jobs([job_id for job_id in jobs if job_id is not None])
    results = [[run.result if run.done else None for run in runs[job_id]] if job_id else []
               for job_id in jobs]
    reports = [ImportedReport.model_validate(row.report) for row in rows]
    return triage_job_answer(reports, jobs, results, job.environments)


def read_sweep(store: Store, job: JobRow) -> SweepJobAnswer:
    """A sweep job's answer over the stored cases whose two runs are done, and its progress."""
    rows = store.triage_reports(job.id)
    jobs = [row.run_job for row in rows if row.run_job is not None]
    runs = store.runs_of_jobs(jobs)
    results = [[run.result if run.done else None for run in runs[job_id]] for job_id in jobs]
    since, env = job.environments
    return sweep_job_answer(env, since, [StoredCase.model_validate(row.report) for row in rows],
                            jobs, results)


def part_runs(store: Store, job_id: str) -> list[RunRow]:
    """Every run of a triage or sweep job's run jobs."""
    return [run for found in store.runs_of_jobs(store.triage_run_jobs(job_id)).values()
            for run in found]


def record_triage(store: Store, reports: list[ImportedReport], answer: TriageAnswer) -> int:
    """Keep the signature of each issue the triage saw fail, replacing what earlier triages
    kept of the issues it measured; how many it keeps."""
    issues = known_issues(reports, answer)
    # What is kept of a report that could not be measured now stays as it was.
    unmeasured = {line.number for line in answer.reports if line.verdict == Verdict.INCOMPATIBLE}
    store.record_known_issues(issues, [r.number for r in reports
                                       if r.number is not None and r.script is not None
                                       and r.number not in unmeasured])
    return len(issues)


def record_finished_triage(store: Store, run_job: str) -> None:
    """After a run of `run_job` is stored: if it belongs to a triage whose runs are now all
    done, record the triage's known issues (two last finishers both record the same)."""
    triage_id = store.triage_of(run_job)
    if triage_id is not None:
        record_if_finished(store, triage_id)


def record_if_finished(store: Store, triage_id: str) -> None:
    """Record a triage's known issues if every run of it is done (a triage served whole from
    the cache is done as it is stored: its submission records them)."""
    job = store.job(triage_id, results=False)
    if job is None or job.kind != JobKind.TRIAGE:
        return
    answer = read_triage(store, job)
    if not answer.finished:
        return
    reports = [ImportedReport.model_validate(row.report) for row in store.triage_reports(job.id)]
    kept = record_triage(store, reports, answer.answer())
    log.info("triage %s finished: %d known issue(s) kept", job.id, kept)
