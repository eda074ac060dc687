"""`tvmrepro import` (cases from issue bodies) and `tvmrepro triage` (every report run on the
environments, then verdicts, groups of one bug and the audit of the issues' states)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.narrowing import local_runtime
from cli.output import (
    SERVER_HELP,
    error_console,
    print_json,
    reports_errors,
    shown,
)
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from tvmrepro.tracker.importing import ImportedReport, import_file
from tvmrepro.tracker.known import (
    KnownIssue,
    bug_signature,
    known_issues,
    likely_duplicates,
    result_bug_signature,
)
from tvmrepro.tracker.triage import TriageAnswer, TriageRun, Verdict, triage

if TYPE_CHECKING:
    from worker.runtimes.base import Runtime

# What `import -o DIR` writes beside the scripts, and what `triage DIR` reads.
REPORTS_FILE = "reports.json"


def script_name(report: ImportedReport, index: int) -> str:
    """The file name of a report's script case in an import's directory."""
    return f"{report.number}.py" if report.number is not None else f"report-{index}.py"


def write_import(reports: list[ImportedReport], directory: Path) -> None:
    """Each report's script as a .py case (as `tvmrepro run` takes it), its module-mode case
    beside it as .json where it has one, and the import itself."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, report in enumerate(reports):
        script = directory / script_name(report, index)
        if report.script is not None:
            script.write_text(report.script)
        if report.module_case is not None:
            script.with_suffix(".json").write_text(json.dumps(report.module_case, indent=2) + "\n")
    data = {"reports": [report.model_dump(mode="json") for report in reports]}
    (directory / REPORTS_FILE).write_text(json.dumps(data, indent=1) + "\n")


def read_reports(source: Path) -> list[ImportedReport]:
    """The reports of an export, a Markdown issue, or a directory `import -o` wrote."""
    if not source.is_dir():
        return import_file(source)
    path = source / REPORTS_FILE
    try:
        data = json.loads(path.read_text())
        return [ImportedReport.model_validate(item) for item in data["reports"]]
    except FileNotFoundError as exc:
        raise BadInput(str(source), f"no {REPORTS_FILE}: not a directory that "
                                    "`tvmrepro import -o` wrote") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput(str(path), f"not an import's {REPORTS_FILE}: {exc}") from exc


def _import_row(report: ImportedReport) -> str:
    what = (f"script, {len((report.script or '').splitlines())} lines" if report.script
            else f"no_code: {report.no_code}")
    if report.module_case is not None:
        what += " (and a module-mode case)"
    version = f" (TVM {report.tvm_version})" if report.tvm_version else ""
    quoted = f"; quotes {report.quoted_error}" if report.quoted_error else ""
    return f"{report.label} {report.state or ''}{version}: {what}{quoted}"


@click.command("import")
@click.argument("source", metavar="ISSUE.md|ISSUES.json",
                type=click.Path(path_type=Path, dir_okay=False))
@click.option("-o", "--output", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write each report's script (NUMBER.py, a case for `tvmrepro run`) and "
                   f"{REPORTS_FILE} here.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"reports\": [...]} as JSON.")
@reports_errors
def import_command(source: Path, output: Path | None, as_json: bool) -> None:
    """Cases from issue bodies: a `gh issue list --json number,title,state,body,url` export, or
    one issue's Markdown."""
    reports = import_file(source)
    if output is not None:
        write_import(reports, output)
        error_console().print(f"{output}: {sum(r.script is not None for r in reports)} scripts "
                              f"of {len(reports)} reports", highlight=False)
    if as_json:
        print_json({"reports": [report.model_dump(mode="json") for report in reports]})
        return
    for report in reports:
        click.echo(shown(_import_row(report)))


def triage_run(result: Result) -> TriageRun:
    """A run's result as triage reads it: a failure's signature as known issues keep it (a
    crash's with its stage)."""
    status = result.status.value
    error = f"{result.error_type}: {result.message}" if result.error_type else None
    signature = bug_signature(status, result.signature, result.stage) or result.signature
    return TriageRun(env=result.environment, status=status, signature=signature, error=error)


def run_reports(reports: list[ImportedReport], envs: list[Environment],
                runtime: Runtime) -> list[list[TriageRun]]:
    """Every report with code run on every environment (oldest first) through `runtime`."""
    from worker.runner import run_variant

    console = error_console()
    runs: list[list[TriageRun]] = []
    for report in reports:
        if report.script is None:
            runs.append([])
            continue
        case = report.case()
        report_runs = []
        for env in envs:
            console.print(f"running {report.label} on {env.id} ...", highlight=False)
            report_runs.append(triage_run(run_variant(case, case.variant_names[0], env, runtime)))
        runs.append(report_runs)
    return runs


def triage_locally(reports: list[ImportedReport], envs: list[Environment]) -> TriageAnswer:
    """Triage with sandboxes of this command's own (TVM imported once per environment, not
    once per report)."""
    with local_runtime("local", envs) as runtime:
        return triage(reports, run_reports(reports, envs, runtime))


def record_known_issues(reports: list[ImportedReport], answer: TriageAnswer,
                        settings: Settings) -> None:
    """Keep the signature of each issue a triage saw fail in the store of `settings` (the one
    `tvmrepro up` on this home reads), replacing what earlier triages kept of these issues."""
    from tvmrepro.store import open_store

    settings.ensure_home()
    store = open_store(settings.store_url, pooled=False)
    try:
        issues = known_issues(reports, answer)
        # What is kept of a report that could not be measured now stays as it was.
        unmeasured = {line.number for line in answer.reports
                      if line.verdict == Verdict.INCOMPATIBLE}
        store.record_known_issues(issues, [r.number for r in reports
                                           if r.number is not None and r.script is not None
                                           and r.number not in unmeasured])
    finally:
        store.dispose()
    error_console().print(f"{len(issues)} known issue(s) kept for likely duplicates",
                          highlight=False)


def known_here(runs: list[dict[str, Any]], title: str, settings: Settings) -> list[KnownIssue]:
    """The issues a triage on this home kept that fail with a signature of these runs (none
    where this home has no store yet: a read makes none)."""
    import sqlalchemy as sa

    from tvmrepro.store import open_store

    signatures = [found for run in runs if (found := result_bug_signature(run)) is not None]
    url = sa.engine.make_url(settings.store_url)
    if not signatures or (url.get_backend_name() == "sqlite"
                          and not Path(url.database or "").exists()):
        return []
    store = open_store(settings.store_url, pooled=False)
    try:
        return likely_duplicates(signatures, store.known_issues_failing_with(signatures), title)
    finally:
        store.dispose()


def print_duplicates(issues: list[KnownIssue]) -> None:
    """A line per likely duplicate, after a run's table."""
    for issue in issues:
        click.echo(shown(f"likely duplicate of #{issue.number} ({issue.title}) {issue.url or ''}"
                         .rstrip()))


def _named(number: int | None) -> str:
    """An issue by its number; one issue's Markdown has none."""
    return f"#{number}" if number is not None else "the report"


def print_answer(answer: TriageAnswer) -> None:
    for line in answer.reports:
        since = f" since {line.since}" if line.since else ""
        grouped = f" group {line.group}" if line.group else ""
        statuses = ", ".join(f"{env}: {status}" for env, status in line.statuses.items())
        state = f" {line.state}" if line.state else ""
        click.echo(shown(f"{_named(line.number)}{state}: {line.verdict.value}{since}{grouped} "
                         f"({statuses or line.no_code})"))
    for group in answer.groups:
        if len(group.reports) > 1:
            members = ", ".join(_named(number) for number in group.reports)
            click.echo(shown(f"group {group.id}: {members}, representative "
                             f"{_named(group.representative)}: {group.signature}"))
    for entry in answer.audit:
        since = f" (since {entry.since})" if entry.since else ""
        click.echo(shown(f"audit: {_named(entry.number)} {entry.state}: "
                         f"{entry.finding.value}{since}"))


@click.command("triage")
@click.argument("source", metavar="ISSUES.json|DIR", type=click.Path(path_type=Path))
@click.option("--env", "env_ids", multiple=True,
              help="Environment id (repeatable; default with --local: one per minor release).")
@click.option("--local", is_flag=True, help="Run here, without the service.")
@click.option("--record/--no-record", default=True,
              help="Keep each failing issue's signature in this home's store (default), so "
                   "that a job failing with it names the issue a likely duplicate.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@reports_errors
def triage_command(source: Path, env_ids: tuple[str, ...], local: bool, record: bool,
                   as_json: bool) -> None:
    """Run every report on the environments: verdicts, groups of one bug, and the audit."""
    if not local:
        raise BadInput("--local", "triage runs here only for now: add --local")
    reports = read_reports(source)
    catalog = default_catalog()
    envs = ([catalog.get(env_id, "--env") for env_id in env_ids] if env_ids
            else catalog.spanning("cpu"))
    envs.sort(key=lambda env: env.version)
    answer = triage_locally(reports, envs)
    if record:
        record_known_issues(reports, answer, Settings.from_env())
    if as_json:
        print_json(answer.to_json())
    else:
        print_answer(answer)


@click.command("export-test")
@click.argument("job_id", metavar="JOB")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the test here (default: standard output).")
@click.option("--server", default=None, help=SERVER_HELP)
@reports_errors
def export_test_command(job_id: str, output: Path | None, server: str | None) -> None:
    """A pytest file for TVM's suite: the job's reduced (or extracted, or own) case as a strict
    xfail on its signature, needing only TVM and pytest."""
    from cli.remote import connect
    from tvmrepro.tracker.export_test import export_test

    text = export_test(connect(server).job(job_id), default_catalog())
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text)
    error_console().print(f"{output}: a strict xfail on the signature of job {job_id}",
                          highlight=False)
