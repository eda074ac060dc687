"""`tvmrepro run`: a case's variants on pinned environments, through the service (submitted, its
runs followed, the matrix printed) or here with --local (on the warm sandboxes of a live `up` on
this home when one serves them all)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from cli.client import WARM_POLL_S, ApiClient, resumable
from cli.commands.tracker import known_here, print_duplicates
from cli.discovery import connect, on_warm_up
from cli.local import fingerprints_announced
from cli.matrix_view import matrix_view
from cli.output import SERVER_HELP, error_console, print_json, print_runs, reports_errors, shown
from tvmrepro.api.requests import RunRequest
from tvmrepro.api.views import JobView, RunView
from tvmrepro.attachments import WITH_CONTENTS, attach, read_files
from tvmrepro.cases import Case, load_case_file
from tvmrepro.choice import FLAG_WHY, Choice, default_choice, over_fields, over_text
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.frontends import needs_frontends
from tvmrepro.jobs.fanout import fan_out, select_variants
from tvmrepro.lifecycle import JobStatus, RunState
from tvmrepro.settings import Settings
from worker.runtimes import make_runtime

# --file of the commands that take a CASE.
FILE_HELP = ("A file the case reads from its working directory (a model, pickled inputs), "
             "written there read-only under its name (repeatable).")


def _selected_envs(env_ids: tuple[str, ...]) -> Choice:
    """--env's environments, else the default set (the same as the service's)."""
    catalog = default_catalog()
    if env_ids:
        return Choice([catalog.get(i, "--env") for i in env_ids], FLAG_WHY)
    return default_choice(catalog)


def with_layer(case: Case) -> Case:
    """The case asking for a layer verdict (BadInput: it is no script)."""
    if case.script is None:
        raise BadInput("--layer", "places a script's failure (a .py file); a case's variants "
                                  "name their passes already")
    return case.model_copy(update={"layer": True})


def _variants(case: Case, names: tuple[str, ...]) -> list[str]:
    return select_variants(case, names, "--variant")


def run_locally(case: Case, envs: list[Environment], variants: list[str],
                runtime_name: str, cold: bool = False) -> list[dict[str, Any]]:
    """Run every variant in every environment here, without the service: on the warm
    sandboxes of a `tvmrepro up` on this home when one serves them all (unless `cold`), else
    in sandboxes started now."""
    from worker.runner import run_variant

    settings = Settings.from_env()
    on_up = None if cold else on_warm_up(runtime_name, [env.id for env in envs],
                                         lambda url: run_on_service(case, envs, variants, url))
    if on_up is not None:
        return on_up
    runtime = make_runtime(runtime_name, settings)
    # The local runtime provisions what is missing; Docker asks each environment's image.
    fingerprints = fingerprints_announced(runtime, settings, envs)
    if case.layer:  # a verdict runs a failing cell again and again: one TVM import each
        runtime.start_zygotes([env.with_frontends() if needs_frontends(case) else env
                               for env in envs])
    runs = []
    try:
        for planned in fan_out(case, envs, fingerprints, variants, variant_field="--variant"):
            error_console().print(f"running {planned.variant} on {planned.env.id} ...",
                                  highlight=False)
            runs.append(run_variant(case, planned.variant, planned.env, runtime).to_json())
    finally:
        if case.layer:  # its zygotes end with the command
            runtime.close()
    return runs


@click.command("run")
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
@click.option("--file", "file_paths", multiple=True, type=click.Path(path_type=Path),
              help=FILE_HELP)
@click.option("--layer", is_flag=True,
              help="For a script that fails or whose outputs differ from its reference: which "
                   "layer first shows it (import, pass:<Name>, codegen, runtime), from more "
                   "runs of the script with its pipeline cut (docs/layers.md).")
@reports_errors
def run_command(case_file: Path, env_ids: tuple[str, ...], variant_names: tuple[str, ...],
                local: bool, runtime_name: str, cold: bool, as_json: bool, server: str | None,
                no_wait: bool, bypass_cache: bool, queue: bool, title: str | None,
                file_paths: tuple[Path, ...], layer: bool) -> None:
    """Run a case (.json) or a repro script (.py) on pinned TVM environments."""
    case = attach(load_case_file(case_file), read_files(file_paths))
    if title is not None:
        case = case.model_copy(update={"title": title})
    if layer:
        case = with_layer(case)
    chosen = _selected_envs(env_ids)
    envs = chosen.environments
    variants = _variants(case, variant_names)
    if not local:
        # No --env: the service's default set (of it, those a live worker serves).
        run_remotely(case, envs if env_ids else None, variants, server, as_json, not no_wait,
                     bypass_cache, queue)
        return
    runs = run_locally(case, envs, variants, runtime_name, cold)
    over = over_fields(chosen.ids, chosen.why)
    try:
        duplicates = known_here(runs, case.title, Settings.from_env())
    except Exception as exc:  # the runs are the answer: a store that cannot be read loses none
        error_console().print(f"likely duplicates not read: {shown(exc)}",
                              highlight=False)
        duplicates = []
    if as_json:
        print_json({"runs": runs, "environments": chosen.ids, **over}
                   | ({"likely_duplicates": [issue.model_dump(mode="json")
                                             for issue in duplicates]} if duplicates else {}))
    else:
        print_runs(runs, title=case.title or case_file.name,
                   caption=over_text(chosen.ids, chosen.why, over["not_probed"]))
        print_duplicates(duplicates)


def _describe(run: RunView) -> str:
    result = run.result or {}
    if run.state != RunState.DONE:
        return str(run.state.value)
    text = str(result.get("status", "?")) + (f" at {result['stage']}" if result.get("stage")
                                              else "")
    return shown(text + (" (cached)" if run.cached else ""))


def follow(client: ApiClient, job: JobView, console: Console) -> JobView:
    """Poll a job until it is finished, showing each run's progress."""
    columns = (SpinnerColumn(), TextColumn("{task.description}"),
               TextColumn("{task.fields[state]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        tasks: dict[str, TaskID] = {
            run.id: progress.add_task(shown(f"{run.variant} @ {run.environment}"), total=1,
                                      state=_describe(run))
            for run in job.runs}
        while True:
            for run in job.runs:
                progress.update(tasks[run.id], state=_describe(run),
                                completed=1 if run.state == RunState.DONE else 0)
            if job.status.finished:
                return job
            job = client.job_after(job)


def finish_run(client: ApiClient, job: JobView, as_json: bool) -> None:
    """Wait for a run job, showing each run's progress, then print the matrix (or JSON)."""
    with resumable(client, job.id, as_json):
        job = follow(client, job, error_console())
        runs = client.results(job) if as_json else []
    if as_json:
        print_json({"runs": runs, "environments": job.environments,
                    "environments_why": job.environments_why, "not_probed": job.not_probed,
                    "job": job.model_dump(mode="json")})
        return
    Console(width=max(Console().width, 120)).print(matrix_view(job))
    print_duplicates(job.likely_duplicates)


def run_job(case: Case, envs: list[Environment] | None, variants: list[str],
            bypass_cache: bool, queue: bool = False) -> RunRequest:
    """POST /jobs's request for a run job (no environments: left out, the service's default
    set)."""
    request = RunRequest(case=case.model_dump(mode="json", exclude_defaults=True,
                                              context=WITH_CONTENTS),
                         variants=variants, bypass_cache=bypass_cache, wait=queue)
    if not envs:
        return request  # sent without them (the client sends the fields it set)
    return request.model_copy(update={"environments": [env.id for env in envs]})


def run_remotely(case: Case, envs: list[Environment] | None, variants: list[str],
                 server: str | None, as_json: bool, wait: bool = True, bypass_cache: bool = False,
                 queue: bool = False) -> None:
    """Submit a case to the service (--server, or the one find_service finds), wait for it,
    print the matrix (or JSON)."""
    client = connect(server)
    job = client.submit(run_job(case, envs, variants, bypass_cache, queue))
    console = error_console()
    console.print(f"job {job.id} at {client.server}", highlight=False)
    if not wait:  # the id on stdout, for scripts: tvmrepro report "$(tvmrepro run ... --no-wait)"
        print_json(job.model_dump(mode="json")) if as_json else print(job.id)
        return
    with resumable(client, job.id, as_json):
        served = {env.id for env in client.environments() if env.workers}
    for env_id in job.environments:
        if env_id not in served and job.status != JobStatus.DONE:  # --queue asked for it
            console.print(f"no live worker serves {env_id} yet; its runs wait until one does "
                          f"(tvmrepro worker --env {env_id}; Ctrl-C leaves them queued)",
                          highlight=False)
    finish_run(client, job, as_json)


def run_on_service(case: Case, envs: list[Environment], variants: list[str],
                   server: str) -> list[dict[str, Any]]:
    """Run every variant in every environment on the service at `server`, its cache bypassed,
    and return the runs' full results, as a run here would (`run --local` beside `up`)."""
    client = ApiClient(server, reconnect_s=0)
    job = client.submit(run_job(case, envs, variants, bypass_cache=True))
    while not job.status.finished:
        job = client.job_after(job, WARM_POLL_S)
    return client.results(job)
