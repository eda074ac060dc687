"""`tvmrepro history`: apache/tvm's commit history that windows and suspects come from; `update`
makes its index from a local clone, into this home, and it is the default from then on."""

from __future__ import annotations

from pathlib import Path

import click

from cli.output import error_console, print_json, reports_errors
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.history import History, history_source, open_history
from tvmrepro.settings import Settings


def history_said(history: History | None, source: str) -> str:
    """'history: NAME (where it comes from), newest commit DATE'."""
    if history is None:
        return "history: none (windows and suspects are left out)"
    newest = history.newest()
    return f"history: {history.name} ({source}), newest commit {newest or 'unknown'}"


def default_history(settings: Settings) -> tuple[History | None, str]:
    """The history bisect uses without --history, and where it comes from, in words (a
    TVMREPRO_TVM_HISTORY that cannot be read is named, not fatal: this only says)."""
    source = ("TVMREPRO_TVM_HISTORY" if settings.tvm_history
              else history_source(None, settings.home))
    try:
        return open_history(settings.tvm_history, settings.home), source
    except BadInput as exc:
        return None, f"{source}: {exc.problem}"


@click.group()
def history() -> None:
    """apache/tvm's commit history (bisect's windows and suspects)."""


@history.command("update")
@click.argument("path", type=click.Path(path_type=Path, file_okay=False))
@click.option("--since", default=None,
              help="Only commits since this date (default: 30 days before the oldest pinned "
                   "release's branch left main; the whole history where the clone lacks its "
                   "tag).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@reports_errors
def history_update(path: Path, since: str | None, as_json: bool) -> None:
    """Make the commit index from a local clone of apache/tvm (PATH), into TVMREPRO_HOME; bisect,
    the service and `env list` use it from then on (unless --history or TVMREPRO_TVM_HISTORY
    names another)."""
    from tvmrepro.jobs.bisect.history_index import update

    settings = Settings.from_env()
    settings.ensure_home()
    error_console().print(f"reading {path} with git log -p (a minute or more for a year of "
                          "commits) ...", highlight=False)
    built = update(path, settings.home, default_catalog(), since)
    facts = {"path": str(built.path), "commits": built.commits, "oldest": built.oldest,
             "newest": built.newest, "since": built.since}
    if as_json:
        print_json(facts)
        return
    click.echo(f"{built.path}: {built.commits} commits, {built.oldest} to {built.newest} "
               f"(since {built.since or 'the first commit'})")
    if settings.tvm_history:
        click.echo(f"TVMREPRO_TVM_HISTORY ({settings.tvm_history}) still comes first: unset it "
                   "to use this one")
