"""Triage jobs on the API's side: store one (a run job per report with code, every run queued
or served from the cache, all admitted at once), and read its answer from those runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial

from tvmrepro.cases import Case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.rows import JobRow, RunRow
from tvmrepro.store import Store
from tvmrepro.store_triages import TriageReportRow, insert_triage_reports
from tvmrepro.tracker.importing import ImportedReport
from tvmrepro.tracker.triage_job import REPORTS_FIELD

# The run jobs of one report: (job, its runs), made as a run job's are (cache hits included).
MakeRuns = Callable[[str, Case, list[Environment], float], list[RunRow]]


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


def store_triage(store: Store, reports: list[ImportedReport], envs: list[Environment],
                 make_runs: MakeRuns, bypass_cache: bool, cap: int,
                 now: float) -> tuple[str, list[RunRow]]:
    """Store a triage job, its reports and each report's run job with its runs, in one
    transaction (QueueFull: nothing stored); its id and the runs to publish."""
    triage_id = uuid.uuid4().hex
    env_ids = [env.id for env in envs]
    jobs: list[tuple[JobRow, list[RunRow]]] = [(JobRow(
        id=triage_id, kind="triage", title=triage_title(reports), case={},
        environments=env_ids, variants=[], bypass_cache=bypass_cache, created_at=now), [])]
    rows = []
    for index, report in enumerate(reports):
        run_job = None
        if report.script is not None:
            case = report_case(report, index)
            run_job = uuid.uuid4().hex
            jobs.append((JobRow(id=run_job, kind="run", title=report.label,
                                case=case.model_dump(mode="json", exclude_defaults=True),
                                environments=env_ids, variants=case.variant_names,
                                bypass_cache=bypass_cache, created_at=now),
                         make_runs(run_job, case, envs, now)))
        rows.append(TriageReportRow(ordinal=index, report=report.model_dump(mode="json"),
                                    run_job=run_job))
    store.submit_jobs(jobs, cap, partial(insert_triage_reports, job_id=triage_id, rows=rows))
    return triage_id, [run for _, runs in jobs for run in runs]
