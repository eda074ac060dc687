"""`tvmrepro env`: the pinned TVM environments, and which are provisioned here."""

from __future__ import annotations

import click

from cli.commands.history import default_history, history_said
from cli.output import print_json, reports_errors
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.settings import Settings


@click.group()
def env() -> None:
    """Pinned TVM environments."""


@env.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reports_errors
def env_list(as_json: bool) -> None:
    """Known environments, and which are provisioned here."""
    from worker.environments.health import broken
    from worker.environments.provision import read_fingerprint

    settings = Settings.from_env()
    rows = []
    for environment in default_catalog().environments:
        fingerprint = read_fingerprint(settings, environment)
        flavour = environment.with_frontends() if environment.frontend_packages else None
        rows.append({"id": environment.id, "tvm": environment.release, "device": environment.device,
                     "image": environment.image, "packages": environment.packages,
                     "frontend_packages": environment.frontend_packages,
                     "verified": environment.verified,
                     "provisioned": fingerprint is not None,
                     "frontends_provisioned": flavour is not None
                     and read_fingerprint(settings, flavour) is not None,
                     "commit": (fingerprint or {}).get("commit"),
                     "health": (fingerprint or {}).get("health")})
    known, source = default_history(settings)
    said = history_said(known, source)
    if as_json:
        print_json({"environments": rows, "history": {
            "name": known.name if known else None, "source": source,
            "newest": known.newest() if known else None}})
        return
    for row in rows:
        mark = "provisioned" if row["provisioned"] else "-"
        mark += " +frontends" if row["frontends_provisioned"] else ""
        health = row["health"] if isinstance(row["health"], dict) else None
        failing = "; ".join(f"broken at {stage}: {error}" for stage, error in broken(health))
        click.echo(f"{row['id']:<28} {row['device']:<5} {mark:<24} {row['commit'] or ''} "
                   f"{failing}".rstrip())
    click.echo(said)


@env.command("provision")
@click.argument("env_ids", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every environment in the catalog.")
@click.option("--frontends", is_flag=True,
              help="Also their frontend flavour (torch, onnx, onnxruntime), which a report that "
                   "imports them runs in (else made on its first such report).")
@reports_errors
def env_provision(env_ids: tuple[str, ...], everything: bool, frontends: bool) -> None:
    """Make local pinned environments (idempotent; safe to run twice at once)."""
    from worker.environments.provision import provision

    if not env_ids and not everything:
        raise BadInput("ENV", "name at least one environment, or --all")
    settings = Settings.from_env()
    catalog = default_catalog()
    targets = catalog.environments if everything else [catalog.get(i, "ENV") for i in env_ids]
    flavours = [env.with_frontends() for env in targets] if frontends else []
    for environment in [*targets, *flavours]:
        what = " with its frontends" if environment.frontends else ""
        click.echo(f"provisioning {environment.id}{what} ...", err=True)
        facts = provision(settings, environment)
        click.echo(f"{environment.id}: TVM {facts['version']}{what} ready", err=True)
