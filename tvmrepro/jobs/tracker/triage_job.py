"""A triage job of the service: the reports a request gives, and the answer read from the runs
of each report's run job (docs/contract.md, "Tracker": the same answer as `triage --local`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError

from tvmrepro.api.pages import PageShown
from tvmrepro.cases import bad_input
from tvmrepro.errors import BadInput
from tvmrepro.jobs.bounded import within
from tvmrepro.jobs.tracker.importing import ImportedReport, export_entry, import_markdown
from tvmrepro.jobs.tracker.known import bug_signature
from tvmrepro.jobs.tracker.triage import TriageAnswer, TriageRun, triage
from tvmrepro.settings import MAX_ISSUE_NUMBER

REPORTS_FIELD = "reports"
# What importing a triage's reports may take in all (each one: importing.IMPORT_BUDGET_S).
TRIAGE_IMPORT_BUDGET_S = 15.0


class TriageProgress(BaseModel):
    """How far a triage job is: reports whose every run is done, and runs."""

    reports: int
    reports_done: int
    runs: int
    runs_done: int


class TriageJobAnswer(TriageAnswer):
    """A triage job's `triage` field: the answer over the reports done so far (all of them once
    `finished`), each report's run job beside it, and the progress."""

    environments: list[str] = Field(description="oldest first; the verdict is the newest's")
    jobs: list[str | None] = Field(description="jobs[i]: the run job of reports[i] (its runs, "
                                               "logs and reproducers); null: no code")
    titles: list[str] = Field(description="titles[i]: the issue title of reports[i]")
    urls: list[str | None] = Field(description="urls[i]: the issue address of reports[i]")
    progress: TriageProgress
    finished: bool = Field(description="every report has its runs")
    page: PageShown | None = Field(
        default=None, description="which of the reports done so far reports, jobs, titles "
                                  "and urls list (?offset=&limit=); null: all of them")
    records_known_issues: bool = Field(
        default=False, description="its failing issues become the service's known issues "
                                   "once it finishes (a triage its maintainer submitted); "
                                   "anyone else's triage keeps them in this answer only")

    def answer(self) -> TriageAnswer:
        """The part that `tvmrepro triage --json` prints."""
        return TriageAnswer(reports=self.reports, groups=self.groups, audit=self.audit,
                            environments=self.environments,
                            environments_why=self.environments_why, not_probed=self.not_probed)


def _report_item(item: Any, index: int) -> ImportedReport:
    where = f"{REPORTS_FIELD}[{index}]"
    if isinstance(item, str):  # one issue's Markdown (its number, title, state read from it)
        return import_markdown(item, where=f"{where}.")
    if isinstance(item, dict) and "body" in item:  # an issue as `gh issue list --json` gives it
        return export_entry(item, index, REPORTS_FIELD)
    if not isinstance(item, dict):
        raise BadInput(where, "must be an issue's Markdown body, an issue object with 'body', "
                              f"or a report as `tvmrepro import --json` prints it; got "
                              f"{type(item).__name__}")
    try:  # a report imported by the client (`tvmrepro import --json`)
        return ImportedReport.model_validate(item, strict=True)
    except ValidationError as exc:
        found = bad_input(exc, "")
        raise BadInput(f"{where}.{found.field}" if found.field else where, found.problem) \
            from exc


def reports_of_request(items: Any) -> list[ImportedReport]:
    """The reports of a triage request, each imported; BadInput names the wrong one."""
    if not isinstance(items, list) or not items:
        raise BadInput(REPORTS_FIELD, "a triage job takes a non-empty list of reports")
    with within(TRIAGE_IMPORT_BUDGET_S):  # every report's patterns, together
        reports = [_report_item(item, index) for index, item in enumerate(items)]
    for index, report in enumerate(reports):
        # The known issues' key, and a link's: a number no tracker has is refused.
        if report.number is not None and not 1 <= report.number <= MAX_ISSUE_NUMBER:
            raise BadInput(f"{REPORTS_FIELD}[{index}].number", f"an issue's number is from 1 "
                           f"to {MAX_ISSUE_NUMBER}, got {report.number}")
    numbers = [report.number for report in reports if report.number is not None]
    if len(set(numbers)) != len(numbers):
        twice = sorted({n for n in numbers if numbers.count(n) > 1})
        raise BadInput(REPORTS_FIELD, f"issue numbers appear twice: {twice}")
    return reports


def triage_run_of(result: dict[str, Any]) -> TriageRun:
    """A run's result (stored summary or full) as triage reads it: a failure's signature as
    known issues keep it (a crash's with its stage)."""
    status = str(result.get("status"))
    error = (f"{result['error_type']}: {result.get('message') or ''}"
             if result.get("error_type") else None)
    signature = bug_signature(status, result.get("signature"), result.get("stage"))
    return TriageRun(env=str(result.get("environment")), status=status,
                     signature=signature or result.get("signature"), error=error,
                     stage=result.get("stage"),
                     environment_defect=result.get("environment_defect"))


def triage_job_answer(reports: list[ImportedReport], jobs: list[str | None],
                      results: list[list[dict[str, Any] | None]],
                      environments: list[str]) -> TriageJobAnswer:
    """The answer over the reports whose runs are all done, given each report's run job and its
    runs' results in `environments` order (None: not done yet)."""
    done = [all(result is not None for result in found) for found in results]
    chosen = [i for i, finished in enumerate(done) if finished]
    answer = triage([reports[i] for i in chosen],
                    [[triage_run_of(result) for result in results[i] if result is not None]
                     for i in chosen])
    runs = sum(len(found) for found in results)
    progress = TriageProgress(reports=len(reports), reports_done=len(chosen), runs=runs,
                              runs_done=sum(r is not None for found in results for r in found))
    return TriageJobAnswer(reports=answer.reports, groups=answer.groups, audit=answer.audit,
                           environments=environments, jobs=[jobs[i] for i in chosen],
                           titles=[reports[i].title for i in chosen],
                           urls=[reports[i].url for i in chosen],
                           progress=progress, finished=all(done))
