"""`tvmrepro import` (cases from issue bodies) and `tvmrepro triage` (every report run on the
environments, then verdicts, groups of one bug and the audit of the issues' states)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from pydantic import BaseModel

from cli.client import ApiClient, ServiceError, resumable
from cli.discovery import connect, on_warm_up
from cli.local import local_runtime
from cli.output import (
    SERVER_HELP,
    error_console,
    print_json,
    reports_errors,
    shown,
)
from tvmrepro.api.issues import KnownIssue
from tvmrepro.attachments import WITH_CONTENTS
from tvmrepro.choice import FLAG_WHY, Choice, default_choice, over_fields, over_text
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.tracker.importing import ImportedReport, import_file
from tvmrepro.jobs.tracker.known import likely_duplicates, result_bug_signature
from tvmrepro.jobs.tracker.triage import TriageAnswer, TriageRun, triage
from tvmrepro.jobs.tracker.triage_job import triage_run_of
from tvmrepro.results import Result
from tvmrepro.settings import Settings, variable_name

if TYPE_CHECKING:
    from tvmrepro.api.views import JobView
    from tvmrepro.jobs.tracker.triage_job import TriageJobAnswer
    from worker.runtimes.base import Runtime

# A triage's answer is read from all its runs: asked for once a second, not as often as a
# run's, so that the API's reads take little of the CPU the runs need.
TRIAGE_POLL_S = 1.0
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
    data = {"reports": reports_json(reports)}
    (directory / REPORTS_FILE).write_text(json.dumps(data, indent=1) + "\n")


def reports_json(reports: list[ImportedReport]) -> list[dict[str, Any]]:
    """The reports as `import --json` prints them: their files with their contents (what
    `triage` runs them with)."""
    return [report.model_dump(mode="json", context=WITH_CONTENTS) for report in reports]


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
    if report.files:
        what += f"; files {', '.join(entry.name for entry in report.files)}"
    if report.missing_files:
        what += f"; files not given: {', '.join(report.missing_files)} (--attachments DIR)"
    version = f" (TVM {report.tvm_version})" if report.tvm_version else ""
    quoted = f"; quotes {report.quoted_error}" if report.quoted_error else ""
    return f"{report.label} {report.state or ''}{version}: {what}{quoted}"


@click.command("import")
@click.argument("source", metavar="ISSUE.md|ISSUES.json",
                type=click.Path(path_type=Path, dir_okay=False))
@click.option("-o", "--output", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write each report's script (NUMBER.py, a case for `tvmrepro run`) and "
                   f"{REPORTS_FILE} here.")
@click.option("--attachments", type=click.Path(path_type=Path, file_okay=False, exists=True),
              default=None, help="A folder of the issues' downloaded attachments: each file a "
              "script names (\"model.onnx\") is attached from DIR/NUMBER/ or DIR/.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"reports\": [...]} as JSON.")
@reports_errors
def import_command(source: Path, output: Path | None, attachments: Path | None,
                   as_json: bool) -> None:
    """Cases from issue bodies: a `gh issue list --json number,title,state,body,url` export, or
    one issue's Markdown or `gh issue view N` output (its number, title and state read from
    gh's header, its `# title`, its address or owner/repo#N, else the file's name)."""
    reports = import_file(source, attachments)
    if output is not None:
        write_import(reports, output)
        error_console().print(f"{output}: {sum(r.script is not None for r in reports)} scripts "
                              f"of {len(reports)} reports", highlight=False)
    if as_json:
        print_json({"reports": reports_json(reports)})
        return
    for report in reports:
        click.echo(shown(_import_row(report)))


def triage_run(result: Result) -> TriageRun:
    """A run's result as triage reads it (as a triage job of the service reads its runs)."""
    return triage_run_of(result.to_json())


def run_reports(reports: list[ImportedReport], envs: list[Environment], runtime: Runtime,
                width: int | None = None) -> list[list[TriageRun]]:
    """Every report with code run on every environment (oldest first) through `runtime`,
    `width` runs at once (default: the cores here)."""
    from worker.runner import run_variant

    console = error_console()
    cases = {index: report.case() for index, report in enumerate(reports)
             if report.script is not None}

    def run_one(index: int, env: Environment) -> TriageRun:
        console.print(f"running {reports[index].label} on {env.id} ...", highlight=False)
        case = cases[index]
        return triage_run(run_variant(case, case.variant_names[0], env, runtime))

    with ThreadPoolExecutor(max_workers=width or os.cpu_count() or 2) as pool:
        runs = {(index, env.id): pool.submit(run_one, index, env)
                for index in cases for env in envs}
        return [[runs[(index, env.id)].result() for env in envs] if index in cases else []
                for index in range(len(reports))]


def triage_locally(reports: list[ImportedReport], envs: list[Environment]) -> TriageAnswer:
    """Triage with sandboxes of this command's own (TVM imported once per environment, not
    once per report)."""
    with local_runtime("local", envs) as runtime:
        return triage(reports, run_reports(reports, envs, runtime))


def record_known_issues(reports: list[ImportedReport], answer: TriageAnswer,
                        settings: Settings) -> None:
    """Keep the signature of each issue a triage saw fail in the store of `settings` (the one
    `tvmrepro up` on this home reads), replacing what earlier triages kept of these issues."""
    from tvmrepro.jobs.tracker.steps import record_triage
    from tvmrepro.store import open_store

    settings.ensure_home()
    store = open_store(settings.store_url, pooled=False, artifacts=settings.artifacts_dir)
    try:
        kept = record_triage(store, reports, answer, settings.tracker_url)
    finally:
        store.dispose()
    error_console().print(f"{kept} known issue(s) kept for likely duplicates", highlight=False)


def known_here(runs: list[dict[str, Any]], title: str, settings: Settings) -> list[KnownIssue]:
    """The issues a triage on this home kept that fail with a signature of these runs (none
    where this home has no store yet: a read makes none)."""
    from tvmrepro.store import open_store, store_exists

    signatures = [found for run in runs if (found := result_bug_signature(run)) is not None]
    if not signatures or not store_exists(settings.store_url):
        return []
    store = open_store(settings.store_url, pooled=False, artifacts=settings.artifacts_dir)
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
    """A line per report, shared group and audit finding, after the line of what it is over."""
    if answer.environments:
        click.echo(shown(over_text(answer.environments, answer.environments_why,
                                   answer.not_probed)))
    for line in answer.reports:
        since = f" since {line.since}" if line.since else ""
        grouped = f" group {line.group}" if line.group else ""
        statuses = ", ".join(f"{env}: {status}" for env, status in line.statuses.items())
        state = f" {line.state}" if line.state else ""
        why = f": {line.incompatible}" if line.incompatible else ""
        click.echo(shown(f"{_named(line.number)}{state}: {line.verdict.value}{since}{grouped} "
                         f"({statuses or line.no_code}){why}"))
        for env, defect in line.environment_defects.items():
            click.echo(shown(f"  not counted, a broken environment: {env} ({defect})"))
    for group in answer.groups:
        if len(group.reports) > 1:
            members = ", ".join(_named(number) for number in group.reports)
            click.echo(shown(f"group {group.id}: {members}, representative "
                             f"{_named(group.representative)}: {group.signature}"))
    for entry in answer.audit:
        since = f" (since {entry.since})" if entry.since else ""
        click.echo(shown(f"audit: {_named(entry.number)} {entry.state}: "
                         f"{entry.finding.value}{since}"))


def follow_answer(client: ApiClient, job: JobView, as_json: bool, kind: str, unit: str,
                  answer_of: Callable[[JobView], Any],
                  counts: Callable[[Any], tuple[int, int | None]]) -> Any:
    """Poll a triage or sweep job until its answer is finished (`answer_of` reads it from the
    job, `counts` its units done and in all), with a bar of `unit` on stderr."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(unit), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=error_console(), transient=as_json) as progress:
        task = progress.add_task(unit, total=None)
        while True:
            answer = answer_of(job)
            if answer is None:
                raise BadInput("job", f"job {job.id} is a {job.kind} job, not a {kind}")
            done, total = counts(answer)
            progress.update(task, completed=done, total=total)
            if answer.finished:
                return answer
            time.sleep(TRIAGE_POLL_S)  # its answer is read from all its runs
            job = client.job(job.id)


# The lists of a triage's and a sweep's answer that a read of the job gives a page of.
PART_FIELDS = {"triage": ("reports", "jobs", "titles", "urls"), "sweep": ("cases", "jobs")}
Answer = TypeVar("Answer", bound=BaseModel)
PAGE_ATTEMPTS = 3


def whole_answer(client: ApiClient, job_id: str, answer: Answer, kind: str) -> Answer:
    """A triage's or sweep's answer with every page of its parts (the service gives a page a
    read: docs/api.md, "Pages"); read again from the first page where its parts changed in
    between (a job still running)."""
    for _ in range(PAGE_ATTEMPTS):
        merged = _every_page(client, job_id, answer, kind)
        if merged is not None:
            return merged
        answer = getattr(client.job(job_id), kind)
    raise ServiceError(f"job {job_id} kept changing while its pages were read; try again")


def _every_page(client: ApiClient, job_id: str, answer: Answer, kind: str) -> Answer | None:
    fields = PART_FIELDS[kind]
    merged: dict[str, list[Any]] = {name: list(getattr(answer, name)) for name in fields}
    page = first = getattr(answer, "page", None)
    while first is not None and page is not None and page.next_offset is not None:
        found = getattr(client.job_page(job_id, page.next_offset), kind)
        if found is None or found.page is None or found.page.total != first.total:
            return None
        for name in fields:
            merged[name] += getattr(found, name)
        page = found.page
    return answer.model_copy(update={**merged, "page": None})


def whole_view(client: ApiClient, job: JobView) -> JobView:
    """A job's view with every part of a triage's or sweep's answer."""
    for kind in PART_FIELDS:
        answer = getattr(job, kind)
        if answer is not None:
            return job.model_copy(update={kind: whole_answer(client, job.id, answer, kind)})
    return job


def follow_triage(client: ApiClient, job: JobView, as_json: bool) -> TriageJobAnswer:
    """Poll a triage job until every report has its runs, with a bar of reports on stderr;
    its whole answer (every page)."""
    answer: TriageJobAnswer = follow_answer(
        client, job, as_json, "triage", "reports", lambda view: view.triage,
        lambda found: (found.progress.reports_done, found.progress.reports))
    return whole_answer(client, job.id, answer, "triage")


def triage_remotely(reports: list[ImportedReport], env_ids: list[str], server: str | None,
                    as_json: bool, recorded_here: bool = False) -> TriageAnswer:
    """Submit a triage job (on the service's default set when none is named), wait
    for it and return its answer; the job goes on if the wait stops (`tvmrepro wait JOB`).
    Unless `recorded_here` (this command keeps them in this home's store), say where its
    known issues went."""
    from tvmrepro.api.requests import TriageRequest

    client = connect(server)
    request = TriageRequest(kind="triage", reports=reports_json(reports))
    if env_ids:  # else left out: the service's default set
        request = request.model_copy(update={"environments": env_ids})
    job = client.submit(request)
    over = over_text(job.environments, job.environments_why, job.not_probed)
    error_console().print(f"triage job {job.id}: {len(reports)} reports {over}",
                          highlight=False)
    with resumable(client, job.id, as_json):
        answer = follow_triage(client, job, as_json)
    if not answer.records_known_issues and not recorded_here:
        error_console().print(
            f"the service keeps known issues only from its maintainer's triages (sent with "
            f"{variable_name('maintainer_token')}): this one's groups are in job {job.id} only",
            highlight=False)
    return answer.answer()


def wait_triage(client: ApiClient, job: JobView, as_json: bool) -> None:
    """`tvmrepro wait` on a triage job: a bar of reports, then its verdicts (or JSON)."""
    with resumable(client, job.id, as_json):
        show_triage(follow_triage(client, job, as_json).answer(), as_json)


def show_triage(answer: TriageAnswer, as_json: bool) -> None:
    """The answer as JSON, or a line per report, group and audit finding."""
    if as_json:
        print_json(answer.to_json())
    else:
        print_answer(answer)


@click.command("triage")
@click.argument("source", metavar="ISSUES.json|DIR", type=click.Path(path_type=Path))
@click.option("--env", "env_ids", multiple=True,
              help="Environment id (repeatable; default: the newest release of each minor "
                   "version, here and through the service).")
@click.option("--local", is_flag=True, help="Run here, without the service (on the warm "
              "sandboxes of a `tvmrepro up` on this home that serves the environments, if one "
              "runs).")
@click.option("--cold", is_flag=True, help="With --local: sandboxes of this command's own even "
              "beside a running `tvmrepro up`.")
@click.option("--record/--no-record", default=True,
              help="Keep each failing issue's signature in this home's store (default), so "
                   "that a job failing with it names the issue a likely duplicate. A triage "
                   "job of the service keeps them in the service's store when "
                   "TVMREPRO_MAINTAINER_TOKEN is its maintainer's token.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.option("--server", default=None, help=SERVER_HELP)
@reports_errors
def triage_command(source: Path, env_ids: tuple[str, ...], local: bool, cold: bool,
                   record: bool, as_json: bool, server: str | None) -> None:
    """Run every report on the environments: verdicts, groups of one bug, and the audit."""
    if local and server:
        raise BadInput("--server", "--local runs here, without a service: give one of them")
    if not local and not record:
        raise BadInput("--no-record", "a triage job of the service keeps what it saw in the "
                                      "service's store; --no-record goes with --local")
    reports = read_reports(source)
    catalog = default_catalog()
    envs = [catalog.get(env_id, "--env") for env_id in env_ids]
    if not local:
        show_triage(triage_remotely(reports, [env.id for env in envs], server, as_json), as_json)
        return
    chosen = Choice(envs, FLAG_WHY) if envs else default_choice(catalog)
    envs = sorted(chosen.environments, key=lambda env: env.version)
    # Beside a live `up` on this home, a triage job there (its worker's TVM imported already;
    # it keeps what it saw in this home's store, as --record does here).
    on_up = None if cold or not record else on_warm_up(
        "local", [env.id for env in envs],
        lambda url: triage_remotely(reports, [env.id for env in envs], url, as_json, True))
    answer = (on_up if on_up is not None else triage_locally(reports, envs)).model_copy(
        update={"environments": [env.id for env in envs],
                **over_fields([env.id for env in envs], chosen.why, catalog)})
    if record:  # this home's store, whoever ran it (its `up` keeps only a maintainer's)
        record_known_issues(reports, answer, Settings.from_env())
    show_triage(answer, as_json)


@click.command("export-test")
@click.argument("job_id", metavar="JOB")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the test here (default: standard output).")
@click.option("--server", default=None, help=SERVER_HELP)
@reports_errors
def export_test_command(job_id: str, output: Path | None, server: str | None) -> None:
    """A pytest file for TVM's suite: the job's reduced (or extracted, or own) case as a strict
    xfail on its signature, needing only TVM and pytest."""
    from tvmrepro.jobs.tracker.export_test import export_test

    text = export_test(connect(server).job(job_id), default_catalog())
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text)
    error_console().print(f"{output}: a strict xfail on the signature of job {job_id}",
                          highlight=False)
