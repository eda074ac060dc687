"""`tvmrepro`: environments, runs (local or through the service) and the service's processes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click

from client.output import error_console, print_json, print_runs
from tvmrepro.cases import Case, check_pass_names, load_case_file
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput, ReproError
from tvmrepro.settings import Settings

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1


def reports_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input exits 2 with the message naming what is wrong; other faults exit 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BadInput as exc:
            error_console().print(f"[red]error:[/red] {exc}", highlight=False)
            sys.exit(EXIT_BAD_INPUT)
        except ReproError as exc:
            error_console().print(f"[red]error:[/red] {exc}", highlight=False)
            sys.exit(EXIT_FAILURE)

    return wrapper


@click.group()
def main() -> None:
    """Run TVM bug reports on pinned TVM versions: what happens, where, and since when."""


@main.group()
def env() -> None:
    """Pinned TVM environments."""


@env.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reports_errors
def env_list(as_json: bool) -> None:
    """Known environments, and which are provisioned here."""
    from worker.provision import read_fingerprint

    settings = Settings.from_env()
    rows = []
    for environment in default_catalog().environments:
        fingerprint = read_fingerprint(settings, environment)
        rows.append({"id": environment.id, "tvm": environment.release, "device": environment.device,
                     "image": environment.image, "packages": environment.packages,
                     "provisioned": fingerprint is not None})
    if as_json:
        print_json({"environments": rows})
        return
    for row in rows:
        mark = "provisioned" if row["provisioned"] else "-"
        click.echo(f"{row['id']:<28} {row['device']:<5} {mark}")


@env.command("provision")
@click.argument("env_ids", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every environment in the catalog.")
@reports_errors
def env_provision(env_ids: tuple[str, ...], everything: bool) -> None:
    """Make local pinned environments (idempotent; safe to run twice at once)."""
    from worker.provision import provision

    if not env_ids and not everything:
        raise BadInput("ENV", "name at least one environment, or --all")
    settings = Settings.from_env()
    catalog = default_catalog()
    targets = catalog.environments if everything else [catalog.get(i, "ENV") for i in env_ids]
    for environment in targets:
        click.echo(f"provisioning {environment.id} ...", err=True)
        facts = provision(settings, environment)
        click.echo(f"{environment.id}: TVM {facts['version']} ready", err=True)


def _selected_envs(env_ids: tuple[str, ...]) -> list[Environment]:
    catalog = default_catalog()
    if env_ids:
        return [catalog.get(i, "--env") for i in env_ids]
    return catalog.select(None, device="cpu")


def _variants(case: Case, names: tuple[str, ...]) -> list[str]:
    for name in names:
        case.variant(name)
    return list(names) or case.variant_names


def run_locally(case: Case, envs: list[Environment], variants: list[str],
                runtime_name: str) -> list[dict[str, Any]]:
    """Run every variant in every environment here, without the service."""
    from worker.provision import provision
    from worker.runner import run_variant
    from worker.runtimes import make_runtime

    settings = Settings.from_env()
    runtime = make_runtime(runtime_name, settings)
    if runtime_name == "local":
        known: set[str] = set()
        for environment in envs:
            known.update(provision(settings, environment).get("passes", []))
        check_pass_names(case, known)
    runs = []
    for environment in envs:
        for variant in variants:
            error_console().print(f"running {variant} on {environment.id} ...", highlight=False)
            runs.append(run_variant(case, variant, environment, runtime).to_json())
    return runs


@main.command("run")
@click.argument("case_file", type=click.Path(path_type=Path))
@click.option("--env", "env_ids", multiple=True, help="Environment id (repeatable).")
@click.option("--variant", "variant_names", multiple=True, help="Variant name (repeatable).")
@click.option("--local", is_flag=True, help="Run here, without the service.")
@click.option("--runtime", "runtime_name", type=click.Choice(["local", "docker"]), default="local",
              help="With --local: a sandboxed local environment, or the environment's image.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"runs\": [...]} as JSON.")
@click.option("--server", default=None, help="Service URL (default $TVMREPRO_SERVER).")
@reports_errors
def run(case_file: Path, env_ids: tuple[str, ...], variant_names: tuple[str, ...], local: bool,
        runtime_name: str, as_json: bool, server: str | None) -> None:
    """Run a case (.json) or a repro script (.py) on pinned TVM environments."""
    case = load_case_file(case_file)
    envs = _selected_envs(env_ids)
    variants = _variants(case, variant_names)
    if not local:
        from client.remote import run_remotely

        run_remotely(case, envs, variants, server or Settings.from_env().server, as_json)
        return
    runs = run_locally(case, envs, variants, runtime_name)
    if as_json:
        print_json({"runs": runs})
    else:
        print_runs(runs, title=case.title or case_file.name)
