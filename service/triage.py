"""Triage and sweep jobs on the API's side: store one as a run job per part (a triage's report
with code, a sweep's stored case), every run queued or served from the cache, all admitted at
once; its view, whose answer is read from those runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from service.matrix import build_matrix, job_status
from tvmrepro.cases import Case, parse_case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.lifecycle import JobKind
from tvmrepro.models import JobView
from tvmrepro.rows import JobRow, RunRow
from tvmrepro.settling import submit_jobs
from tvmrepro.store import Store
from tvmrepro.store_triages import TriageReportRow, insert_triage_reports
from tvmrepro.tracker.importing import ImportedReport
from tvmrepro.tracker.sweep import StoredCase
from tvmrepro.tracker.triage_job import REPORTS_FIELD
from tvmrepro.triage_jobs import part_runs, read_sweep, read_triage, record_if_finished

# A part's runs on the environments, made as a run job's are (cache hits included).
MakeRuns = Callable[[str, Case, list[Environment], float], list[RunRow]]
# What a part is stored with (a report, a stored case), and its run job's title, case and
# variants (None: no run job).
Part = tuple[dict[str, Any], tuple[str, Case, list[str]] | None]


def report_case(report: ImportedReport, index: int) -> Case:
    """A report's script case; a script that is no case is bad input naming the report."""
    try:
        return report.case()
    except BadInput as exc:
        raise BadInput(f"{REPORTS_FIELD}[{index}].script", exc.problem) from exc


def triage_title(reports: list[ImportedReport]) -> str:
    """How a triage job is named in the job list."""
    numbers = [report.number for report in reports if report.number is not None]
    shown = ", ".join(f"#{n}" for n in numbers[:3]) + (", ..." if len(numbers) > 3 else "")
    return f"triage of {len(reports)} report{'s' * (len(reports) != 1)}" + \
        (f" ({shown})" if shown else "")


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
            jobs.append((JobRow(id=run_job, kind=JobKind.RUN.value, title=title,
                                case=case.model_dump(mode="json", exclude_defaults=True),
                                environments=parent.environments, variants=variants,
                                bypass_cache=parent.bypass_cache, created_at=parent.created_at),
                         make_runs(run_job, case, envs, parent.created_at)))
        rows.append(TriageReportRow(ordinal=index, report=item, run_job=run_job))
    submit_jobs(store, jobs, cap, partial(insert_triage_reports, job_id=parent.id, rows=rows))
    return [run for _, runs in jobs for run in runs]


def store_triage(store: Store, reports: list[ImportedReport], envs: list[Environment],
                 make_runs: MakeRuns, bypass_cache: bool, cap: int,
                 now: float) -> tuple[str, list[RunRow]]:
    """Store a triage job: a run job for each report with code; its id and the runs to
    publish. One whose runs all came from the cache keeps its known issues now."""
    parent = JobRow(id=uuid.uuid4().hex, kind=JobKind.TRIAGE.value, title=triage_title(reports),
                    case={}, environments=[env.id for env in envs], variants=[],
                    bypass_cache=bypass_cache, created_at=now)
    parts: list[Part] = []
    for index, report in enumerate(reports):
        case = report_case(report, index) if report.script is not None else None
        parts.append((report.model_dump(mode="json"),
                      (report.label, case, case.variant_names) if case else None))
    runs = store_parts(store, parent, parts, envs, make_runs, cap)
    if all(run.done for run in runs):  # all from the cache: no worker will record it
        record_if_finished(store, parent.id)
    return parent.id, runs


def store_sweep(store: Store, cases: list[StoredCase], old: Environment, new: Environment,
                make_runs: MakeRuns, cap: int, now: float) -> tuple[str, list[RunRow]]:
    """Store a sweep job: a run job for each stored case's variant on `old` and `new` (the
    store's decisive results served from the cache); its id and the runs to publish."""
    parent = JobRow(id=uuid.uuid4().hex, kind=JobKind.SWEEP.value,
                    title=f"sweep of {len(cases)} stored cases, {old.id} -> {new.id}", case={},
                    environments=[old.id, new.id], variants=[], created_at=now)
    parts: list[Part] = [(stored.model_dump(mode="json"),
                          (stored.title or f"job {stored.job}", parse_case(stored.case),
                           [stored.variant])) for stored in cases]
    return parent.id, store_parts(store, parent, parts, [old, new], make_runs, cap)


def parts_view(store: Store, job: JobRow, created_at: str) -> JobView:
    """A triage or sweep job: its answer so far; its runs are its run jobs' (each on its own
    page), so it has none of its own."""
    runs = part_runs(store, job.id)
    return JobView(
        id=job.id, kind=job.kind, title=job.title, status=job_status(runs),
        created_at=created_at, environments=job.environments, variants=[],
        bypass_cache=job.bypass_cache, cached_runs=sum(run.cached for run in runs), runs=[],
        matrix=build_matrix(job, []), case={},
        triage=read_triage(store, job) if job.kind == JobKind.TRIAGE else None,
        sweep=read_sweep(store, job) if job.kind == JobKind.SWEEP else None)
