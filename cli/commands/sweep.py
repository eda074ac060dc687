"""`tvmrepro sweep`: every stored case (the store's run jobs) on a new environment, and what
changed against an older one. Results the store already holds for a case on an environment
(its cache) are read, not run again; the rest run here on warm sandboxes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cli.client import ApiClient, resumable
from cli.commands.tracker import follow_answer, whole_answer
from cli.discovery import connect
from cli.local import local_runtime
from cli.output import SERVER_HELP, error_console, print_json, reports_errors, shown
from tvmrepro.attachments import with_contents
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.tracker.sweep import (
    Change,
    Outcome,
    StoredCase,
    SweepAnswer,
    SweepJobAnswer,
    outcome,
    previous_environment,
    stored_cases,
    sweep_answer,
)
from tvmrepro.lifecycle import cache_key
from tvmrepro.settings import Settings

if TYPE_CHECKING:
    from tvmrepro.api.views import JobView
    from tvmrepro.store import Store
    from worker.runtimes.base import Runtime


def outcome_on(store: Store, stored: StoredCase, env: Environment, runtime: Runtime) -> Outcome:
    """The case's variant on `env`: the store's decisive result for it, else a run here."""
    from worker.runner import run_variant

    case = with_contents(parse_case(stored.case), store.blobs)  # its files from the store
    found = store.cached_result(cache_key(case, stored.variant, env))
    result = store.result(found) if found is not None else None
    if result is None:
        error_console().print(f"running {stored.title or stored.job} ({stored.variant}) on "
                              f"{env.id} ...", highlight=False)
        result = run_variant(case, stored.variant, env, runtime).to_json()
    return outcome(result)


def sweep(store: Store, old: Environment, new: Environment, runtime: Runtime) -> SweepAnswer:
    """Every stored case's variant on `old` and `new`, and what changed."""
    cases = stored_cases(store.jobs_of_kind("run"))
    outcomes = [(outcome_on(store, case, old, runtime), outcome_on(store, case, new, runtime))
                for case in cases]
    return sweep_answer(new.id, old.id, cases, outcomes)


def _print_answer(answer: SweepAnswer) -> None:
    for line in answer.cases:
        if line.change != Change.SAME:
            click.echo(shown(f"{line.change.value}: {line.title or line.job} ({line.variant}): "
                             f"{line.old.status} -> {line.new.status}"
                             + (f", {line.new.signature}" if line.new.signature else "")))
    counts = ", ".join(f"{n} {change}" for change, n in answer.changed.items()) or "no cases"
    click.echo(f"{answer.since} -> {answer.env}: {counts}")


def sweep_locally(old: Environment, new: Environment) -> SweepAnswer:
    """The sweep of this home's store, its runs here (not stored)."""
    from tvmrepro.store import open_store

    settings = Settings.from_env()
    settings.ensure_home()
    store = open_store(settings.store_url, pooled=False, artifacts=settings.artifacts_dir)
    try:
        with local_runtime("local", [old, new]) as runtime:
            return sweep(store, old, new, runtime)
    finally:
        store.dispose()


def follow_sweep(client: ApiClient, job: JobView, as_json: bool) -> SweepJobAnswer:
    """Poll a sweep job until every stored case has both outcomes, with a bar on stderr."""
    answer: SweepJobAnswer = follow_answer(
        client, job, as_json, "sweep", "cases", lambda view: view.sweep,
        lambda found: (found.progress.cases_done, found.progress.cases))
    if answer.next_offset is not None:
        error_console().print(f"the store holds more stored cases than one sweep runs: "
                              f"--offset {answer.next_offset} sweeps the next ones",
                              highlight=False)
    return whole_answer(client, job.id, answer, "sweep")


def sweep_remotely(env_id: str, since: str | None, server: str | None,
                   as_json: bool, offset: int = 0) -> SweepAnswer:
    """Submit a sweep job of the service's store (its stored cases from `offset`), wait for
    it, return its answer."""
    from tvmrepro.api.requests import SweepRequest

    client = connect(server)
    # Only the options given are sent (the service's defaults for the rest).
    given: dict[str, Any] = {"since": since, "offset": offset or None}
    request = SweepRequest.model_validate(
        {"kind": "sweep", "env": env_id, **{k: v for k, v in given.items() if v is not None}})
    try:
        job = client.submit(request)
    except BadInput as exc:  # the service names its fields; the user gave options
        raise BadInput(f"--{exc.field}" if exc.field in ("env", "since", "offset")
                       else exc.field,
                       exc.problem) from None
    error_console().print(f"sweep job {job.id}: {job.title}", highlight=False)
    with resumable(client, job.id, as_json):
        return follow_sweep(client, job, as_json).answer()


def wait_sweep(client: ApiClient, job: JobView, as_json: bool) -> None:
    """`tvmrepro wait` on a sweep job: a bar of cases, then its changes (or JSON)."""
    with resumable(client, job.id, as_json):
        show_sweep(follow_sweep(client, job, as_json).answer(), as_json)


def show_sweep(answer: SweepAnswer, as_json: bool) -> None:
    """The answer as JSON, or a line per change and the counts."""
    if as_json:
        print_json(answer.model_dump(mode="json"))
    else:
        _print_answer(answer)


@click.command("sweep")
@click.option("--env", "env_id", required=True, help="The new environment.")
@click.option("--since", default=None,
              help="The environment to compare with (default: the newest release of the "
                   "minor version before --env's, as the default set has it).")
@click.option("--local", is_flag=True,
              help="Sweep this home's store here, without the service (its runs not stored).")
@click.option("--offset", type=click.IntRange(min=0), default=0,
              help="Through the service: from this stored case on (a sweep runs at most "
                   "TVMREPRO_MAX_SWEEP_CASES of them; it says where the next ones start).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.option("--server", default=None, help=SERVER_HELP)
@reports_errors
def sweep_command(env_id: str, since: str | None, local: bool, offset: int, as_json: bool,
                  server: str | None) -> None:
    """Every stored case on a new environment: what was fixed, what regressed, what fails
    another way. Through the service (a sweep job, its runs stored), or --local."""
    catalog = default_catalog()
    new = catalog.get(env_id, "--env")
    old = catalog.get(since, "--since") if since else previous_environment(catalog, new, "--since")
    why = ("named by --since" if since
           else "the default: the newest release of the minor version before")
    error_console().print(f"sweep: {new.id} (named by --env) against {old.id} ({why})",
                          highlight=False)
    if not local:
        show_sweep(sweep_remotely(new.id, old.id, server, as_json, offset), as_json)
        return
    if server:
        raise BadInput("--server", "--local runs here, without a service: give one of them")
    if offset:
        raise BadInput("--offset", "--local sweeps every stored case of this home's store")
    show_sweep(sweep_locally(old, new), as_json)
