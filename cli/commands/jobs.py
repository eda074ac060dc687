"""Reading the service's jobs from the command line: list, log, IR, compare, report, cancel,
wait.

A run is named as VARIANT@ENVIRONMENT within a job (the run ids stay accepted), so
nobody copies 32-character ids around.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

import click

from cli.client import ApiClient
from cli.discovery import connect
from cli.output import SERVER_HELP, print_json, reports_errors
from tvmrepro.api.views import JobView
from tvmrepro.errors import BadInput
from tvmrepro.escaping import visible, visible_line
from tvmrepro.pass_numbers import FROM_ZERO, after_pass

server_option = click.option("--server", default=None, help=SERVER_HELP)


def run_id_of(job: JobView, name: str, field: str) -> str:
    """The run id that VARIANT@ENVIRONMENT (or a run id, or a unique prefix of one) names."""
    variant, at, env = name.partition("@")
    found = [r.id for r in job.runs if (at and r.variant == variant and r.environment == env)
             or (not at and r.id.startswith(name))]
    if len(found) != 1:
        cells = ", ".join(f"{r.variant}@{r.environment}" for r in job.runs)
        raise BadInput(field, f"{name!r} names {len(found)} runs of job {job.id}; its runs: {cells}")
    return found[0]


@click.command("jobs")
@click.option("--limit", type=click.IntRange(1, 200), default=20, help="Jobs to show.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@server_option
@reports_errors
def jobs_command(limit: int, as_json: bool, server: str | None) -> None:
    """The service's jobs, newest first."""
    page = connect(server).jobs(limit)
    if as_json:
        print_json(page.model_dump(mode="json"))
        return
    for job in page.jobs:
        click.echo(visible_line(f"{job.id}  {job.created_at}  {job.kind:<6} {job.done}/"
                                f"{job.runs} runs  {job.title}"))


@click.command("log")
@click.argument("job_id")
@click.argument("run")
@click.option("--stream", type=click.Choice(["both", "stdout", "stderr"]), default="both",
              help="What the run wrote to stdout, to stderr, or both (stdout first).")
@server_option
@reports_errors
def log_command(job_id: str, run: str, stream: str, server: str | None) -> None:
    """What a run printed (RUN: VARIANT@ENVIRONMENT), on stdout: the log is this command's
    output, a crashed run's traceback too; stderr carries only the command's own messages."""
    client = connect(server)
    log = client.log(job_id, run_id_of(client.job(job_id), run, "RUN"))
    out = log.stdout if stream != "stderr" else ""
    if stream != "stdout" and log.stderr:
        out += ("" if not out or out.endswith("\n") else "\n") + log.stderr
    click.echo(visible(out), nl=False)


@click.command("ir")
@click.argument("job_id")
@click.argument("run")
@click.option("--pass", "index", type=int, default=None,
              help="Only the IR after this pass (from 0, as in the stage pass:<index>:<Name>).")
# Scripts written when the command counted from 1 keep working: --step N is --pass N-1.
@click.option("--step", type=int, default=None, hidden=True)
@server_option
@reports_errors
def ir_command(job_id: str, run: str, index: int | None, step: int | None,
               server: str | None) -> None:
    """A run's TVMScript after each pass (RUN: VARIANT@ENVIRONMENT)."""
    client = connect(server)
    passes = client.ir(job_id, run_id_of(client.job(job_id), run, "RUN")).passes
    if step is not None and index is not None:
        raise BadInput("--step", "give --pass INDEX or --step N, not both")
    if step is not None:
        if not 1 <= step <= len(passes):
            raise BadInput("--step", f"the run has steps 1 to {len(passes)} (--pass counts from 0),"
                                     f" not {step}" if passes else "the run has no pass")
        index = step - 1
    if index is not None and not 0 <= index < len(passes):
        raise BadInput("--pass", f"the run has passes 0 to {len(passes) - 1} ({FROM_ZERO}), not "
                                 f"{index}" if passes else "the run has no pass")
    click.echo(f"# {FROM_ZERO}")
    for number, record in enumerate(passes):
        if index in (None, number):
            click.echo(f"# {after_pass(number)}: {visible_line(record.name)}\n"
                       f"{visible(record.ir)}")


@click.command("compare")
@click.argument("job_id")
@click.argument("a")
@click.argument("b")
@server_option
@reports_errors
def compare_command(job_id: str, a: str, b: str, server: str | None) -> None:
    """Where two runs' IR first differs (each VARIANT@ENVIRONMENT), with the diff."""
    client = connect(server)
    job = client.job(job_id)
    found = client.compare(job_id, run_id_of(job, a, "A"), run_id_of(job, b, "B"))
    step = found.first_differing_pass
    if found.identical or step is None:
        click.echo(f"{a} and {b}: the IR is the same after every pass")
        return
    click.echo(f"{a} and {b} first differ {after_pass(step.index)} "
               f"({visible_line(step.a)} / {visible_line(step.b)}); {FROM_ZERO}")
    click.echo(visible(found.diff))


@click.command("report")
@click.argument("job_id")
@click.option("--markdown", is_flag=True, help="Print the Markdown source.")
@server_option
@reports_errors
def report_command(job_id: str, markdown: bool, server: str | None) -> None:
    """A job's report, ready to paste into a TVM issue."""
    from rich.console import Console
    from rich.markdown import Markdown

    from cli.commands.tracker import whole_view
    from tvmrepro.jobs.report import render_report

    # The report escapes what runs wrote; a terminal also gets no control character from it.
    client = connect(server)
    text = visible(render_report(whole_view(client, client.job(job_id))))
    if markdown:
        click.echo(text)
    else:
        Console().print(Markdown(text))


@click.command("cancel")
@click.argument("job_id")
@click.option("--token", default=None,
              help="The job's cancel token (default: the one kept when this machine "
                   "submitted the job, under TVMREPRO_HOME/cancel-tokens).")
@server_option
@reports_errors
def cancel_command(job_id: str, token: str | None, server: str | None) -> None:
    """Cancel a job's runs that have no result yet (only its submitter can: see --token)."""
    done = connect(server).cancel(job_id, token)
    click.echo(f"job {done.id}: {done.cancelled_runs} run(s) cancelled")


@click.command("wait")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON, as the command that submitted the job does with --json.")
@server_option
@reports_errors
def wait_command(job_id: str, as_json: bool, server: str | None) -> None:
    """Wait for a job of the service (one a command stopped waiting for) and print what that
    command prints at the end: a run's matrix, a bisection's probes, a triage's verdicts, a
    sweep's changes; a reduction or an extraction prints its answer as JSON."""
    client = connect(server)
    job = client.job(job_id)
    waiter(job.kind)(client, job, as_json)


def waiter(kind: str) -> Callable[[ApiClient, JobView, bool], None]:
    """What follows a job of `kind` and prints it: the function its KINDS entry names."""
    from tvmrepro.jobs.kinds import KINDS

    if kind not in KINDS:
        raise BadInput("JOB", f"a {kind} job, which this command does not know")
    module, _, name = KINDS[kind].cli.partition(":")
    found: Callable[[ApiClient, JobView, bool], None] = getattr(import_module(module), name)
    return found
