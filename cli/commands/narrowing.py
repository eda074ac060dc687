"""`tvmrepro extract SCRIPT --env ENV` (the module-mode case of the step where a script fails)
and `tvmrepro reduce CASE --env ENV` (the smallest case that still shows the bug): their common
options, and the job that runs them through the service (or on a live `up`) unless --local."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import click

from cli.client import ApiClient, ServiceError, resumable
from cli.discovery import connect, on_warm_up
from cli.local import local_runtime
from cli.output import EXIT_FAILURE, SERVER_HELP, error_console, print_json, reports_errors, shown
from tvmrepro.api.narrowed import Extracted, Reduced
from tvmrepro.api.requests import parse_request
from tvmrepro.api.views import JobView
from tvmrepro.attachments import WITH_CONTENTS
from tvmrepro.cases import Case, load_case_file
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.escaping import visible
from tvmrepro.jobs.fanout import select_variants
from tvmrepro.jobs.narrow.logic import (
    DEFAULT_BUDGET_S,
    DEFAULT_ORACLE,
    EXTRACTED_VARIANT,
    MAX_BUDGET_S,
    MIN_BUDGET_S,
    ProgressEvent,
)

Command = Callable[..., Any]
Progress = Callable[[ProgressEvent], None]
NarrowKind = Literal["reduce", "extract"]


def show_progress(event: ProgressEvent) -> None:
    """One line on stderr per step: the phase, the edit, and the size now."""
    style = "dim" if event.get("kind") == "try" else "bold"
    said = {"passes": event.get("passes"), "lines": event.get("lines"), "runs": event.get("runs")}
    sizes = ", ".join(f"{name} {value}" for name, value in said.items() if value is not None)
    error_console().print(f"[{style}]{shown('[' + str(event.get('phase')) + ']')} "
                          f"{shown(event.get('what', ''))}"
                          f"[/{style}]" + (f"  ({sizes})" if sizes else ""), highlight=False)


def narrowing_options(command: Command) -> Command:
    """--local, --runtime, --cold, --json, -o and --server (applied bottom-up, shown in this order)."""
    options = [
        click.option("--local", is_flag=True, help="Run here, without the service (on the "
                     "warm sandboxes of a `tvmrepro up` on this home when it serves ENV)."),
        click.option("--runtime", "runtime_name", type=click.Choice(["local", "docker"]),
                     default="local", help="With --local: a sandboxed local environment, or "
                                           "the environment's image."),
        click.option("--cold", is_flag=True, help="With --local: sandboxes of this command's "
                     "own even when a `tvmrepro up` on this home has warm ones."),
        click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON."),
        click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
                     default=None, help="Also write the case (JSON) here."),
        click.option("--server", default=None, help=SERVER_HELP),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def write_case(output: Path | None, found: Reduced | Extracted) -> None:
    """Write the case found to -o's file, if one was given (its files with their contents,
    where they are at hand: an extracted frontend script's inputs and reference)."""
    if output is not None:
        case = found.case.model_dump(mode="json", context=WITH_CONTENTS)
        output.write_text(json.dumps(case, indent=2) + "\n")


def follow_narrowing(client: ApiClient, job: JobView, kind: str, progress: Progress) -> JobView:
    """Poll the job until it is finished, telling `progress` each new step."""
    said = None
    while not job.status.finished:
        job = client.job_after(job)
        found = job.reduce if kind == "reduce" else job.extract
        shown = found.progress if found is not None else None
        if shown is not None and (shown.phase, shown.what) != said:
            said = (shown.phase, shown.what)
            progress({"kind": "step", "phase": shown.phase, "what": shown.what,
                      "steps": shown.steps, "runs": shown.runs, "passes": shown.passes,
                      "lines": shown.lines})
    return job


def narrow_remotely(kind: NarrowKind, case: Case, env: Environment, server: str | None,
                    progress: Progress, **fields: Any) -> Reduced | Extracted:
    """Submit a reduce or extract job, follow it, and give its answer (with the job's id).

    An answer that says why there is none is BadInput (the case does not show the bug, the
    script fails where no module is), as it is here; a run the service failed is ServiceError.
    """
    client = connect(server)
    job = client.submit(parse_request({
        "kind": kind, "case": case.model_dump(mode="json", exclude_defaults=True,
                                              context=WITH_CONTENTS),
        "environments": [env.id], **{k: v for k, v in fields.items() if v is not None}}))
    error_console().print(f"{kind} job {job.id} at {client.server}", highlight=False)
    with resumable(client, job.id, as_json=True):
        job = follow_narrowing(client, job, kind, progress)
    return narrowing_answer(job)


def narrow_on_up(kind: NarrowKind, case: Case, env: Environment, runtime_name: str,
                 progress: Progress, **fields: Any) -> Reduced | Extracted | None:
    """A reduce or extract job of a live `tvmrepro up` on this home whose worker serves env
    (TVM imported there already), as narrow_remotely gives it; None when there is no such `up`,
    or it stopped or refused (the command then runs here: where the refusal is the answer,
    that there is none, it comes again in this command's words)."""
    return on_warm_up(runtime_name, [env.id],
                      lambda url: narrow_remotely(kind, case, env, url, progress, **fields))


def wait_narrowing(client: ApiClient, job: JobView, as_json: bool) -> None:
    """`tvmrepro wait` on a reduce or extract job: its steps on stderr, its answer as JSON."""
    with resumable(client, job.id, as_json):
        job = follow_narrowing(client, job, job.kind, show_progress)
    print_json(narrowing_answer(job).model_dump(mode="json"))


def narrowing_answer(job: JobView) -> Reduced | Extracted:
    """A finished reduce or extract job's answer (with the job's id), as --json prints it."""
    kind = job.kind
    found = job.reduce if kind == "reduce" else job.extract
    result = (job.runs[0].result or {}) if job.runs else {}
    if found is None or result.get("status") == "infra_error":
        raise ServiceError(f"the {kind} job {job.id} failed: {result.get('message')}")
    if found.state != "done":
        raise BadInput("CASE" if kind == "reduce" else "SCRIPT",
                       found.error or f"the {kind} job {job.id} ended without an answer")
    answer = {**found.model_dump(mode="json", exclude={"progress", "state"}), "job": job.id}
    return (Reduced if kind == "reduce" else Extracted).model_validate(answer)


@click.command("extract")
@click.argument("script_file", metavar="SCRIPT", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--env", "env_id", required=True, help="Environment to run the script in.")
@click.option("--at", "at", type=click.Choice(["chain", "failing", "inner"]), default="chain",
              help="Start at the module the failing step's chain of passes began with (chain), "
                   "at the module that entered the failing step (failing), or at the innermost "
                   "pass that raised, inside a pipeline or a build (inner).")
@narrowing_options
@reports_errors
def extract_command(script_file: Path, env_id: str, at: str, local: bool, runtime_name: str,
                    cold: bool, as_json: bool, output: Path | None, server: str | None) -> None:
    """Extract the IRModule and passes where SCRIPT fails (a pass, the build, VM creation)."""
    script = load_case_file(script_file)
    env = default_catalog().get(env_id, "--env")
    found = extracted(script, env, at, local, runtime_name, cold, server)
    write_case(output, found)
    if as_json:
        print_json(found.model_dump(mode="json"))
    else:
        _show(found)
    if not found.reproduces:
        run = found.case_run
        error_console().print("[red]the extracted case does not reproduce the script:[/red] it "
                              + shown(f"gives {run.status} at {run.stage} "
                                      f"({run.signature})"), highlight=False)
        raise SystemExit(EXIT_FAILURE)


def extracted(script: Case, env: Environment, at: str, local: bool, runtime_name: str,
              cold: bool, server: str | None) -> Extracted:
    """The extraction of `script` on env: on a running `up`, here (--local), or by the service."""
    found = (narrow_on_up("extract", script, env, runtime_name, show_progress, at=at)
             if local and not cold else None)
    if found is None and local:
        from worker.narrowing.extraction import extract

        with local_runtime(runtime_name, [env]) as runtime:
            error_console().print(f"running {script.title or 'the script'} on {env.id} "
                                  "(extract mode) ...", highlight=False)
            found = extract(script, env, runtime, at=at)
    elif found is None:
        found = narrow_remotely("extract", script, env, server, show_progress, at=at)
    assert isinstance(found, Extracted)  # an extract job's answer
    return found


def _show(found: Extracted) -> None:
    console = error_console()
    case = found.case
    spec = case.variant(EXTRACTED_VARIANT)
    passes = [p.name for p in spec.passes] if spec is not None else []
    console.print(shown(f"fails at {found.stage}: {found.signature}"), highlight=False)
    console.print(shown(f"case: {len((case.source or '').splitlines())} lines of TVMScript, "
                        f"passes {', '.join(passes) or '(none)'}, target "
                        f"{case.target or '(default)'}; reproduces: "
                        f"{'yes' if found.reproduces else 'no'}"), highlight=False)
    for note in found.notes:
        console.print(shown(f"note: {note}"), highlight=False)
    click.echo(json.dumps(found.case.model_dump(mode="json"), indent=2))


@click.command("reduce")
@click.argument("case_file", metavar="CASE", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--env", "env_id", required=True, help="Environment to reduce in.")
@click.option("--variant", "variant_name", default=None,
              help="Variant to reduce (may be left out when the case has one).")
@click.option("--oracle", default=DEFAULT_ORACLE, show_default=True,
              help="When a candidate still shows the bug: signature (the original run's), "
                   "signature:<text>, failure, status:<s>, regex:<pattern>.")
@click.option("--budget-s", type=click.IntRange(MIN_BUDGET_S, MAX_BUDGET_S),
              default=DEFAULT_BUDGET_S, show_default=True,
              help="Time budget; when it is spent, the best case so far.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True,
              help="With --local: candidate runs at once (one sandbox each; on a `tvmrepro up`, "
                   "its worker's).")
@narrowing_options
@reports_errors
def reduce_command(case_file: Path, env_id: str, variant_name: str | None, oracle: str,
                   budget_s: int, workers: int, local: bool, runtime_name: str, cold: bool,
                   as_json: bool, output: Path | None, server: str | None) -> None:
    """Shrink a case's pass list and module while the oracle still holds (a script: the
    module and passes of the step where it fails, extracted first)."""
    case = load_case_file(case_file)
    env = default_catalog().get(env_id, "--env")
    if local and graph_reduced(case, env, runtime_name, budget_s, as_json, output):
        return
    if case.script is not None:
        extraction = extracted(case, env, "chain", local, runtime_name, cold, server)
        if not extraction.reproduces:
            raise BadInput("CASE", f"the module extracted from {case_file.name} does not "
                                   "reproduce the script's failure: nothing to reduce (see "
                                   f"tvmrepro extract {case_file.name} --env {env.id})")
        case = extraction.case
    variant = select_variants(case, (variant_name,) if variant_name else (), "--variant")
    if len(variant) != 1:
        raise BadInput("--variant", f"name the variant to reduce; the case has {variant}")
    fields = {"variant": variant[0], "oracle": oracle, "budget_s": budget_s}
    found = (narrow_on_up("reduce", case, env, runtime_name, show_progress, **fields)
             if local and not cold else None)
    if found is None and local:
        from worker.narrowing.reduction import Options, reduce_case

        options = Options(env=env, variant=variant[0], oracle=oracle, budget_s=budget_s,
                          workers=workers)
        with local_runtime(runtime_name, [env]) as runtime:
            found = reduce_case(case, options, runtime, progress=show_progress)
    elif found is None:
        found = narrow_remotely("reduce", case, env, server, show_progress, **fields)
    assert isinstance(found, Reduced)  # a reduce job's answer
    write_case(output, found)
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    before, after = found.before, found.after
    error_console().print(f"passes {before.passes} -> {after.passes}, lines "
                          f"{before.lines} -> {after.lines} in {found.steps} steps "
                          f"({found.runs} runs, {found.seconds} s"
                          f"{'' if found.finished else ', budget spent'})", highlight=False)
    click.echo(visible(found.case.source or ""), nl=False)


def graph_reduced(case: Case, env: Environment, runtime_name: str, budget_s: int,
                  as_json: bool, output: Path | None) -> bool:
    """Reduce an ONNX script's graph where its failure is in `from_onnx` (--local only; see
    worker/narrowing/onnx_reduce.py): the answer shown and the script written to -o; False
    where the script is not such a one (it is then extracted and reduced as a module)."""
    from worker.narrowing.onnx_reduce import NotAnImportFailure, imports_onnx, reduce_graph

    if not imports_onnx(case):
        return False
    with local_runtime(runtime_name, [env]) as runtime:
        try:
            found = reduce_graph(case, env, runtime, budget_s,
                                 log=lambda line: error_console().print(shown(line),
                                                                        highlight=False))
        except NotAnImportFailure:
            return False
    if output is not None:
        output.write_text(found.script if output.suffix == ".py" else
                          json.dumps(found.case.model_dump(mode="json"), indent=2) + "\n")
    if as_json:
        print_json(found.answer())
    else:
        click.echo(visible(found.script), nl=False)
    if not found.reproduces:
        error_console().print("[red]the reduced graph's script does not reproduce the "
                              "script's failure[/red]", highlight=False)
        raise SystemExit(EXIT_FAILURE)
    return True
