"""`tvmrepro sweep`: every stored case (the store's run jobs) on a new environment, and what
changed against an older one. Results the store already holds for a case on an environment
(its cache) are read, not run again; the rest run here on warm sandboxes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cli.narrowing import local_runtime
from cli.output import error_console, print_json, reports_errors, shown
from tvmrepro.cases import parse_case
from tvmrepro.environments import Catalog, Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.lifecycle import cache_key
from tvmrepro.settings import Settings
from tvmrepro.tracker.sweep import (
    Change,
    Outcome,
    StoredCase,
    SweepAnswer,
    outcome,
    stored_cases,
    sweep_answer,
)

if TYPE_CHECKING:
    from tvmrepro.store import Store
    from worker.runtimes.base import Runtime


def previous_environment(catalog: Catalog, new: Environment) -> Environment:
    """The newest final release of the same device before `new` (else any release before it)."""
    older = [env for env in catalog.spanning(new.device) if env.version < new.version]
    older = older or [env for env in catalog.environments
                      if env.device == new.device and env.version < new.version]
    if not older:
        raise BadInput("--since", f"no environment before {new.id}: name one")
    return max(older, key=lambda env: env.version)


def outcome_on(store: Store, stored: StoredCase, env: Environment, runtime: Runtime) -> Outcome:
    """The case's variant on `env`: the store's decisive result for it, else a run here."""
    from worker.runner import run_variant

    case = parse_case(stored.case)
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


@click.command("sweep")
@click.option("--env", "env_id", required=True, help="The new environment.")
@click.option("--since", default=None,
              help="The environment to compare with (default: the release before --env).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@reports_errors
def sweep_command(env_id: str, since: str | None, as_json: bool) -> None:
    """Every stored case on a new environment: what was fixed, what regressed, what fails
    another way."""
    from tvmrepro.store import open_store

    catalog = default_catalog()
    new = catalog.get(env_id, "--env")
    old = catalog.get(since, "--since") if since else previous_environment(catalog, new)
    settings = Settings.from_env()
    settings.ensure_home()
    store = open_store(settings.store_url, pooled=False)
    try:
        with local_runtime("local", [old, new]) as runtime:
            answer = sweep(store, old, new, runtime)
    finally:
        store.dispose()
    if as_json:
        print_json(answer.model_dump(mode="json"))
    else:
        _print_answer(answer)
