"""`tvmrepro reduce CASE --env ENV`: the smallest case that still shows the bug."""

from __future__ import annotations

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
from cli.output import error_console, print_json, reports_errors
from tvmrepro.cases import load_case_file
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.escaping import visible
from tvmrepro.fanout import select_variants
from tvmrepro.narrowed import Reduced
from tvmrepro.narrowing import DEFAULT_BUDGET_S, DEFAULT_ORACLE, MAX_BUDGET_S, MIN_BUDGET_S


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
    if case.script is not None:
        from cli.extract import extracted

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
        from worker.reduction import Options, reduce_case

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
