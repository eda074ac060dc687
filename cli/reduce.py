"""`tvmrepro reduce CASE --env ENV`: the smallest case that still shows the bug."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from cli.cli import reports_errors
from cli.output import error_console, print_json
from tvmrepro.cases import load_case_file
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.fanout import select_variants
from tvmrepro.settings import Settings


def show_progress(event: dict[str, Any]) -> None:
    """One line on stderr per step: the phase, the edit, and the size now."""
    style = "dim" if event.get("kind") == "try" else "bold"
    error_console().print(f"[{style}]{escape('[' + event['phase'] + ']')} {escape(event['what'])}"
                          f"[/{style}]  (passes {event['passes']}, lines {event['lines']}, "
                          f"runs {event['runs']})", highlight=False)


@click.command("reduce")
@click.argument("case_file", metavar="CASE", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--env", "env_id", required=True, help="Environment to reduce in.")
@click.option("--variant", "variant_name", default=None,
              help="Variant to reduce (may be left out when the case has one).")
@click.option("--oracle", default="signature", show_default=True,
              help="When a candidate still shows the bug: signature (the original run's), "
                   "signature:<text>, failure, status:<s>, regex:<pattern>.")
@click.option("--budget-s", type=click.IntRange(10, 24 * 3600), default=900, show_default=True,
              help="Time budget; when it is spent, the best case so far.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Candidate runs at once (one sandbox each).")
@click.option("--local", is_flag=True, help="Run here, without the service.")
@click.option("--runtime", "runtime_name", type=click.Choice(["local", "docker"]), default="local",
              help="With --local: a sandboxed local environment, or the environment's image.")
@click.option("--json", "as_json", is_flag=True, help="Print the reduce object as JSON.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the reduced case (JSON) here.")
@reports_errors
def reduce_command(case_file: Path, env_id: str, variant_name: str | None, oracle: str,
                   budget_s: int, workers: int, local: bool, runtime_name: str, as_json: bool,
                   output: Path | None) -> None:
    """Shrink a case's pass list and module while the oracle still holds."""
    from worker.reduction import Options, reduce_case
    from worker.runtimes import make_runtime

    case = load_case_file(case_file)
    env = default_catalog().get(env_id, "--env")
    variant = select_variants(case, (variant_name,) if variant_name else (), "--variant")
    if len(variant) != 1:
        raise BadInput("--variant", f"name the variant to reduce; the case has {variant}")
    if not local:
        raise BadInput("--local", "the service does not run reductions yet; run it here with --local")
    runtime = make_runtime(runtime_name, Settings.from_env())
    runtime.fingerprint(env)  # provisions a missing local environment
    options = Options(env=env, variant=variant[0], oracle=oracle, budget_s=budget_s,
                      workers=workers)
    found = reduce_case(case, options, runtime, progress=show_progress)
    if output is not None:
        output.write_text(json.dumps(found["case"], indent=2) + "\n")
    if as_json:
        print_json(found)
        return
    before, after = found["before"], found["after"]
    error_console().print(f"passes {before['passes']} -> {after['passes']}, lines "
                          f"{before['lines']} -> {after['lines']} in {found['steps']} steps "
                          f"({found['runs']} runs, {found['seconds']} s"
                          f"{'' if found['finished'] else ', budget spent'})", highlight=False)
    click.echo(found["case"]["source"], nl=False)
