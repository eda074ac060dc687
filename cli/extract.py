"""`tvmrepro extract SCRIPT --env ENV`: the module-mode case of the step where a script fails."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli.narrowing import (
    local_runtime,
    narrow_on_up,
    narrow_remotely,
    narrowing_options,
    show_progress,
    write_case,
)
from cli.output import EXIT_FAILURE, error_console, print_json, reports_errors, shown
from tvmrepro.cases import Case, load_case_file
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.narrowed import Extracted
from tvmrepro.narrowing import EXTRACTED_VARIANT


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
        from worker.extraction import extract

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
