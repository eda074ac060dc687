"""`tvmrepro`: environments, runs (local or through the service) and the service's processes."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import click

from cli.output import (
    SERVER_HELP,
    error_console,
    fingerprints_announced,
    print_json,
    print_runs,
    reports_errors,
    shown,
)
from tvmrepro.cases import Case, load_case_file
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.fanout import fan_out, select_variants
from tvmrepro.settings import Settings

ALSO_PROVISIONED_HELP = ("With --env: also every CPU environment provisioned on this home, now "
                         "or while it runs (`tvmrepro env provision`); without --env that is the "
                         "default. The local runtime only.")


@click.group()
@click.version_option(package_name="tvmrepro", prog_name="tvmrepro")
def main() -> None:
    """Run TVM bug reports on pinned TVM versions: what happens, where, and since when."""


def entry() -> None:
    """The `tvmrepro` command (and `python -m cli`)."""
    # httpcore imports trio whenever it is installed (the dev tools bring it, for the browser
    # tests): 0.15 s of every command, none of which uses it. Marked absent in the command's own
    # process only: a test process that drives a browser needs it.
    sys.modules.setdefault("trio", None)  # type: ignore[arg-type]
    try:
        main()
    finally:
        # What the command made goes with its process: frozen, it is skipped by the
        # interpreter's last garbage collection at exit (0.1-0.2 s of every command).
        gc.freeze()


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
                     "verified": environment.verified,
                     "provisioned": fingerprint is not None,
                     "commit": (fingerprint or {}).get("commit")})
    if as_json:
        print_json({"environments": rows})
        return
    for row in rows:
        mark = "provisioned" if row["provisioned"] else "-"
        click.echo(f"{row['id']:<28} {row['device']:<5} {mark:<12} {row['commit'] or ''}".rstrip())


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
    return select_variants(case, names, "--variant")


def run_locally(case: Case, envs: list[Environment], variants: list[str],
                runtime_name: str, cold: bool = False) -> list[dict[str, Any]]:
    """Run every variant in every environment here, without the service: on the warm
    sandboxes of a `tvmrepro up` on this home when one serves them all (unless `cold`), else
    in sandboxes started now."""
    from cli.up import on_warm_up, run_on_service
    from worker.runner import run_variant
    from worker.runtimes import make_runtime

    settings = Settings.from_env()
    on_up = None if cold else on_warm_up(runtime_name, [env.id for env in envs],
                                         lambda url: run_on_service(case, envs, variants, url))
    if on_up is not None:
        return on_up
    runtime = make_runtime(runtime_name, settings)
    # The local runtime provisions what is missing; Docker asks each environment's image.
    fingerprints = fingerprints_announced(runtime, settings, envs)
    runs = []
    for planned in fan_out(case, envs, fingerprints, variants, variant_field="--variant"):
        error_console().print(f"running {planned.variant} on {planned.env.id} ...",
                              highlight=False)
        runs.append(run_variant(case, planned.variant, planned.env, runtime).to_json())
    return runs


@main.command("run")
@click.argument("case_file", type=click.Path(path_type=Path))
@click.option("--env", "env_ids", multiple=True, help="Environment id (repeatable).")
@click.option("--variant", "variant_names", multiple=True, help="Variant name (repeatable).")
@click.option("--local", is_flag=True, help="Run here, without the service.")
@click.option("--runtime", "runtime_name", type=click.Choice(["local", "docker"]), default="local",
              help="With --local: a sandboxed local environment, or the environment's image.")
@click.option("--cold", is_flag=True,
              help="With --local: start a sandbox of this command's own even when a "
                   "`tvmrepro up` on this home has warm ones.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"runs\": [...]} as JSON.")
@click.option("--server", default=None, help=SERVER_HELP)
@click.option("--no-wait", is_flag=True, help="Submit and print the job id; do not wait.")
@click.option("--bypass-cache", is_flag=True, help="Run again even where a result exists.")
@click.option("--queue", is_flag=True,
              help="Queue runs for environments that no live worker serves yet (else refused).")
@click.option("--title", default=None,
              help="The job's title (default: the case's, or the script's file name).")
@reports_errors
def run(case_file: Path, env_ids: tuple[str, ...], variant_names: tuple[str, ...], local: bool,
        runtime_name: str, cold: bool, as_json: bool, server: str | None, no_wait: bool,
        bypass_cache: bool, queue: bool, title: str | None) -> None:
    """Run a case (.json) or a repro script (.py) on pinned TVM environments."""
    case = load_case_file(case_file)
    if title is not None:
        case = case.model_copy(update={"title": title})
    envs = _selected_envs(env_ids)
    variants = _variants(case, variant_names)
    if not local:
        from cli.remote import run_remotely

        # No --env: every environment that a live worker of the service serves.
        run_remotely(case, envs if env_ids else None, variants, server, as_json, not no_wait,
                     bypass_cache, queue)
        return
    runs = run_locally(case, envs, variants, runtime_name, cold)
    from cli.tracker import known_here, print_duplicates

    try:
        duplicates = known_here(runs, case.title, Settings.from_env())
    except Exception as exc:  # the runs are the answer: a store that cannot be read loses none
        error_console().print(f"likely duplicates not read: {shown(exc)}",
                              highlight=False)
        duplicates = []
    if as_json:
        print_json({"runs": runs} | ({"likely_duplicates": [issue.model_dump(mode="json")
                                                            for issue in duplicates]}
                                     if duplicates else {}))
    else:
        print_runs(runs, title=case.title or case_file.name)
        print_duplicates(duplicates)


def _service_settings() -> Settings:
    """Settings for a process of the service, with its home and store made (or one clear error)."""
    from tvmrepro.store import open_store

    settings = Settings.from_env()
    settings.ensure_home()
    open_store(settings.store_url)
    return settings


@main.command("serve")
@click.option("--host", default=None, help="Address to bind (default $TVMREPRO_HOST, else 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default $TVMREPRO_PORT, else 8000).")
@reports_errors
def serve_command(host: str | None, port: int | None) -> None:
    """Serve the HTTP API (gunicorn); workers run separately (tvmrepro worker)."""
    from service.server import serve

    serve(_service_settings(), host, port)


@main.command("worker")
@click.option("--env", "env_ids", multiple=True,
              help="Environment whose runs this worker takes (repeatable; default: as for "
                   "`tvmrepro up`, the newest CPU release of each minor version).")
@click.option("--concurrency", type=int, default=None,
              help="Runs at once (default $TVMREPRO_WORKER_CONCURRENCY, else one per core, "
                   "at least 2).")
@click.option("--loglevel", default="INFO", help="Celery log level.")
@click.option("--also-provisioned", is_flag=True, help=ALSO_PROVISIONED_HELP)
@reports_errors
def worker_command(env_ids: tuple[str, ...], concurrency: int | None, loglevel: str,
                   also_provisioned: bool) -> None:
    """Take runs of these environments from the broker (provisioning them, or building their
    images, first)."""
    from cli.up import default_environments
    from tvmrepro.queue import worker_concurrency
    from worker.process import run_worker

    settings = _service_settings()
    envs = [default_catalog().get(i, "--env") for i in env_ids] or default_environments(settings)
    run_worker(settings, envs, concurrency or worker_concurrency(settings), loglevel,
               follow_provisioned=also_provisioned or not env_ids)


@main.command("up")
@click.option("--port", type=int, default=None, help="Port (default $TVMREPRO_PORT, else 8000).")
@click.option("--host", default=None, help="Address to bind (default $TVMREPRO_HOST, else 127.0.0.1).")
@click.option("--env", "env_ids", multiple=True,
              help="Environments for the worker (default: the newest CPU release of each minor "
                   "version, plus the CPU ones provisioned here, now or later).")
@click.option("--also-provisioned", is_flag=True, help=ALSO_PROVISIONED_HELP)
@reports_errors
def up_command(port: int | None, host: str | None, env_ids: tuple[str, ...],
               also_provisioned: bool) -> None:
    """The API and a worker in one command (no Redis needed: embedded broker and SQLite)."""
    from cli.up import default_environments, up

    settings = _service_settings()
    envs = [default_catalog().get(i, "--env") for i in env_ids] or default_environments(settings)
    follow = (also_provisioned or not env_ids) and settings.runtime == "local"
    later = ", and every CPU environment provisioned here later" if follow else ""
    click.echo(f"tvm-repro on http://{host or settings.host}:{port or settings.port} "
               f"(worker for {', '.join(e.id for e in envs)}{later})", err=True)
    up(settings, envs, host or settings.host, port or settings.port, follow)


@main.command("new")
@click.argument("module_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--variant", "variants", multiple=True, metavar="NAME=PASS,PASS",
              help="A named pass sequence (repeatable), e.g. once=FuseTIR,LambdaLift.")
@click.option("--module", default=None, help="The @I.ir_module class (default: the only one).")
@click.option("--target", default=None, help="Build target (default: the environment's).")
@click.option("--entry", default=None, help="Function to call in the VM (default: none).")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the case here (default: standard output).")
@reports_errors
def new_command(module_file: Path, variants: tuple[str, ...], module: str | None,
                target: str | None, entry: str | None, output: Path | None) -> None:
    """Make a case (JSON) from a .py file that defines an IRModule, with named pass sequences."""
    import json

    from cli.new import new_case, provisioned_passes

    case = new_case(module_file, list(variants), module, provisioned_passes(Settings.from_env()),
                    target=target, entry=entry)
    text = json.dumps(case, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"{output}: {len(case['variants'])} variants of {case['module']}", err=True)


@main.command("report")
@click.argument("job_id")
@click.option("--markdown", is_flag=True, help="Print the Markdown source.")
@click.option("--server", default=None, help=SERVER_HELP)
@reports_errors
def report_command(job_id: str, markdown: bool, server: str | None) -> None:
    """A job's report, ready to paste into a TVM issue."""
    from rich.console import Console
    from rich.markdown import Markdown

    from cli.remote import connect
    from tvmrepro.escaping import visible
    from tvmrepro.report import render_report

    # The report escapes what runs wrote; a terminal also gets no control character from it.
    text = visible(render_report(connect(server).job(job_id)))
    if markdown:
        click.echo(text)
    else:
        Console().print(Markdown(text))


@main.group()
def images() -> None:
    """Docker images of the pinned environments (and of the service)."""


@images.command("build")
@click.argument("env_ids", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every environment (of --device).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="With --all: only this device's environments.")
@click.option("--wheelhouse", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Install from these wheels only, with no network (default $TVMREPRO_WHEELHOUSE).")
@click.option("--base-image", default=None, help="Base image instead of the pinned official one.")
@click.option("--service", is_flag=True, help="Also build the service's own image.")
@click.option("--rebuild", is_flag=True, help="Build even the images that are current.")
@reports_errors
def images_build(env_ids: tuple[str, ...], everything: bool, device: str | None,
                 wheelhouse: Path | None, base_image: str | None, service: bool,
                 rebuild: bool) -> None:
    """Build the environments' images, tagged as images/environments.toml says."""
    from worker.images import build_environment_image, build_service_image
    from worker.runtimes.docker import connect

    if not env_ids and not everything and not service:
        raise BadInput("ENV", "name at least one environment, or --all, or --service")
    settings = Settings.from_env()
    wheelhouse = wheelhouse or settings.wheelhouse
    targets = default_catalog().select(list(env_ids), device) if env_ids or everything else []
    client = connect(settings)
    for environment in targets:
        click.echo(f"building {environment.image} ({environment.id}) ...", err=True)
        built = build_environment_image(client, settings, environment, wheelhouse, base_image,
                                        log=lambda line: click.echo(line, err=True),
                                        rebuild=rebuild)
        how = f"built in {built.seconds:.1f} s" if built.built else "current (--rebuild to build)"
        click.echo(f"{built.tag}: {built.image_id[:19]} {how}", err=True)
    if service:
        built = build_service_image(client, settings, wheelhouse, base_image,
                                    log=lambda line: click.echo(line, err=True))
        click.echo(f"{built.tag}: {built.image_id[:19]} in {built.seconds:.1f} s", err=True)


@images.command("wheels")
@click.argument("wheelhouse", type=click.Path(path_type=Path, file_okay=False))
@click.argument("env_ids", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every environment (of --device).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="With --all: only this device's environments.")
@click.option("--python-version", default=None, help="The images' Python (default: the pinned one).")
@click.option("--service", is_flag=True, help="Also the service image's dependencies.")
@reports_errors
def images_wheels(wheelhouse: Path, env_ids: tuple[str, ...], everything: bool,
                  device: str | None, python_version: str | None, service: bool) -> None:
    """Download the pinned wheels into WHEELHOUSE, for offline image builds."""
    from worker.images import download_wheels, fill_wheelhouse, service_requirements

    if not env_ids and not everything and not service:
        raise BadInput("ENV", "name at least one environment, or --all, or --service")
    catalog = default_catalog()
    targets = catalog.select(list(env_ids), device) if env_ids or everything else []
    fill_wheelhouse(targets, wheelhouse, python_version)
    if service:
        python = python_version or catalog.environments[0].python
        download_wheels(service_requirements(), wheelhouse, python, deps=True)
    click.echo(f"{wheelhouse}: {len(list(wheelhouse.glob('*.whl')))} wheels", err=True)



from cli.bisect import bisect_command  # noqa: E402

main.add_command(bisect_command)


def _add_narrowing_commands() -> None:
    """extract, reduce, the job readers, import and triage (imported late: they import this
    module)."""
    from cli.extract import extract_command
    from cli.jobs import (
        cancel_command,
        compare_command,
        ir_command,
        jobs_command,
        log_command,
        wait_command,
    )
    from cli.reduce import reduce_command
    from cli.sweep import sweep_command
    from cli.tracker import export_test_command, import_command, triage_command

    for command in (extract_command, reduce_command, jobs_command, wait_command, log_command,
                    ir_command, compare_command, cancel_command, import_command, triage_command,
                    export_test_command, sweep_command):
        main.add_command(command)


_add_narrowing_commands()
