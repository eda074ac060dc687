"""A triage (or sweep) job in the store: stored as a run job per part (a triage's report with
code, a sweep's stored case), every run queued or served from the cache, all admitted at once;
its answer read from those runs; and the known issues a finished triage keeps. The API stores
and reads it; the worker that stores a triage's last run records what it saw (so that a job
failing with a report's signature names that issue). Both call this."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from tvmrepro.cases import Case, parse_case
from tvmrepro.choice import over_fields
from tvmrepro.environments import Environment
from tvmrepro.jobs.kind import Publish
from tvmrepro.jobs.run import RUN
from tvmrepro.jobs.settling import submit_jobs
from tvmrepro.jobs.tracker import SWEEP, TRIAGE
from tvmrepro.jobs.tracker.importing import ImportedReport
from tvmrepro.jobs.tracker.known import known_issues
from tvmrepro.jobs.tracker.links import issue_url
from tvmrepro.jobs.tracker.sweep import StoredCase, SweepJobAnswer, sweep_job_answer
from tvmrepro.jobs.tracker.triage import TriageAnswer, Verdict
from tvmrepro.jobs.tracker.triage_job import TriageJobAnswer, triage_job_answer
from tvmrepro.settings import Settings
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow, RunRow
from tvmrepro.store.triages import TriageReportRow
from tvmrepro.submitters import MAINTAINER

log = logging.getLogger(__name__)
# A part's runs on the environments, made as a run job's are (cache hits included).
MakeRuns = Callable[[str, Case, list[Environment], float], list[RunRow]]
# What a part is stored with (a report, a stored case), and its run job's title, case and
# variants (None: no run job).
Part = tuple[dict[str, Any], tuple[str, Case, list[str]] | None]


def store_parts(store: Store, parent: JobRow, parts: list[Part], envs: list[Environment],
                make_runs: MakeRuns, cap: int) -> list[RunRow]:
    """Store a job, its parts and each part's run job with its runs, in one transaction
    (QueueFull: nothing stored); the runs to publish."""
    jobs: list[tuple[JobRow, list[RunRow]]] = [(parent, [])]
    rows = []
    for index, (item, run) in enumerate(parts):
        run_job = None
        if run is not None:
            title, case, variants = run
            run_job = uuid.uuid4().hex
            jobs.append((JobRow(id=run_job, kind=RUN, title=title,
                                case=case.model_dump(mode="json", exclude_defaults=True),
                                environments=parent.environments, variants=variants,
                                bypass_cache=parent.bypass_cache, created_at=parent.created_at,
                                environments_why=parent.environments_why),
                         make_runs(run_job, case, envs, parent.created_at)))
        rows.append(TriageReportRow(ordinal=index, report=item, run_job=run_job))
    submit_jobs(store, jobs, cap, {parent.id: rows})
    return [run for _, runs in jobs for run in runs]


def store_triage(store: Store, parent: JobRow, reports: list[ImportedReport],
                 cases: list[Case | None], envs: list[Environment], make_runs: MakeRuns,
                 cap: int, tracker_url: str | None = None) -> list[RunRow]:
    """Store a triage job: a run job for each report with code (its case); the runs to
    publish. A maintainer's whose runs all came from the cache keeps its known issues now."""
    parts: list[Part] = [(report.model_dump(mode="json"),
                          (report.label, case, case.variant_names) if case else None)
                         for report, case in zip(reports, cases, strict=True)]
    runs = store_parts(store, parent, parts, envs, make_runs, cap)
    if all(run.done for run in runs):  # all from the cache: no worker will record it
        record_if_finished(store, parent.id, tracker_url)
    return runs


def store_sweep(store: Store, cases: list[StoredCase], old: Environment, new: Environment,
                make_runs: MakeRuns, cap: int, now: float,
                part: tuple[int, int] | None = None) -> tuple[str, list[RunRow]]:
    """Store a sweep job: a run job for each stored case's variant on `old` and `new` (the
    store's decisive results served from the cache); its id and the runs to publish. `part`:
    the offset of `cases` among the stored cases, and how many the store held (its case keeps
    them: a sweep of the rest starts where this one ends)."""
    offset, stored = part or (0, len(cases))
    shown = "" if (offset, stored) == (0, len(cases)) else \
        f" ({offset + 1}-{offset + len(cases)} of {stored})"
    parent = JobRow(id=uuid.uuid4().hex, kind=SWEEP,
                    title=f"sweep of {len(cases)} stored cases{shown}, {old.id} -> {new.id}",
                    case={"offset": offset, "stored_cases": stored},
                    environments=[old.id, new.id], variants=[], created_at=now)
    parts: list[Part] = [(stored.model_dump(mode="json"),
                          (stored.title or f"job {stored.job}", parse_case(stored.case),
                           [stored.variant])) for stored in cases]
    return parent.id, store_parts(store, parent, parts, [old, new], make_runs, cap)


def read_triage(store: Store, job: JobRow) -> TriageJobAnswer:
    """A triage job's answer over the reports whose runs are all done, and its progress."""
    rows = store.triage_reports(job.id)
    jobs = [row.run_job for row in rows]
    runs = store.runs_of_jobs([job_id for job_id in jobs if job_id is not None])
    results = [[run.result if run.done else None for run in runs[job_id]] if job_id else []
               for job_id in jobs]
    reports = [ImportedReport.model_validate(row.report) for row in rows]
    return triage_job_answer(reports, jobs, results, job.environments).model_copy(
        update=over_fields(job.environments, job.environments_why))


def read_sweep(store: Store, job: JobRow) -> SweepJobAnswer:
    """A sweep job's answer over the stored cases whose two runs are done, and its progress."""
    rows = store.triage_reports(job.id)
    jobs = [row.run_job for row in rows if row.run_job is not None]
    runs = store.runs_of_jobs(jobs)
    results = [[run.result if run.done else None for run in runs[job_id]] for job_id in jobs]
    since, env = job.environments
    answer = sweep_job_answer(env, since, [StoredCase.model_validate(row.report) for row in rows],
                              jobs, results)
    end = int(job.case.get("offset") or 0) + len(rows)
    left = end < int(job.case.get("stored_cases") or 0)
    return answer.model_copy(update={"next_offset": end if left else None})


def part_runs(store: Store, job_id: str) -> list[RunRow]:
    """Every run of a triage or sweep job's run jobs."""
    return [run for found in store.runs_of_jobs(store.triage_run_jobs(job_id)).values()
            for run in found]


def record_triage(store: Store, reports: list[ImportedReport], answer: TriageAnswer,
                  tracker_url: str) -> int:
    """Keep the signature of each issue the triage saw fail, replacing what earlier triages
    kept of the issues it measured; how many it keeps. Each links to its number on the
    tracker, whatever address its report gave."""
    issues = [issue.model_copy(update={"url": issue_url(tracker_url, issue.number)})
              for issue in known_issues(reports, answer)]
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


def after_part_run(store: Store, publish: Publish, run_job: str) -> None:
    """After a run of a run job is stored: the known issues of the triage it is a part of, if
    that finished it (a failure is logged: the runs are stored and the answer is read from
    them; only its known issues wait for the next triage of these reports)."""
    try:
        record_finished_triage(store, run_job)
    except Exception:
        log.exception("recording the known issues of the triage of job %s failed", run_job)


def records_known_issues(job: JobRow) -> bool:
    """Whether the triage's failing issues become the service's known issues: only the
    maintainer's (its token came with the submission). Anyone else's would let one client
    rename, relink or erase what every job's likely duplicates say."""
    return job.submitter == MAINTAINER


def record_if_finished(store: Store, triage_id: str, tracker_url: str | None = None) -> None:
    """Record a maintainer's triage's known issues if every run of it is done (a triage served
    whole from the cache is done as it is stored: its submission records them); `tracker_url`
    (default: TVMREPRO_TRACKER_URL's) is where they link."""
    job = store.job(triage_id, results=False)
    if job is None or job.kind != TRIAGE or not records_known_issues(job):
        return
    answer = read_triage(store, job)
    if not answer.finished:
        return
    reports = [ImportedReport.model_validate(row.report) for row in store.triage_reports(job.id)]
    kept = record_triage(store, reports, answer.answer(),
                         tracker_url or Settings.from_env().tracker_url)
    log.info("triage %s finished: %d known issue(s) kept", job.id, kept)
