"""How the command line shows results (a readable table, or JSON) and errors (exit 2 for bad
input, 1 for other faults)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tvmrepro.errors import BadInput, ReproError
from tvmrepro.escaping import visible, visible_line
from tvmrepro.layers import summary
from tvmrepro.results import LayerVerdict

# The --server option of every command that talks to the service (cli.discovery.find_service).
SERVER_HELP = ("Service URL (default $TVMREPRO_SERVER, else the `tvmrepro up` on this "
               "TVMREPRO_HOME, else 127.0.0.1:$TVMREPRO_PORT, else 127.0.0.1:8000).")

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1

STATUS_STYLE = {"ok": "green", "error": "red", "crash": "bold red", "timeout": "yellow",
                 "oom": "yellow", "incompatible": "blue", "infra_error": "magenta"}


def shown(text: Any) -> str:
    """Text a run or a case wrote, for a rich markup string: one line, control characters
    shown as escapes (`\\x1b`), brackets escaped so that it is no markup."""
    return escape(visible_line(text))


def plain(text: Any, style: str = "") -> Text:
    """The same as a rich Text (a table cell, a line): one line, no markup, no controls."""
    return Text(visible_line(text), style=style)


def print_json(data: Any) -> None:
    """JSON on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def runs_table(runs: list[dict[str, Any]], title: str | None = None,
               caption: str | None = None) -> Table:
    """One row per run: variant, environment, status, stage, signature (`caption` below)."""
    table = Table(title=title and shown(title), caption=caption and shown(caption),
                  show_lines=False)
    for column in ("variant", "environment", "status", "stage", "signature"):
        table.add_column(column, overflow="fold")
    for run in runs:
        status = run.get("status") or "?"
        style = STATUS_STYLE.get(status, "")
        table.add_row(plain(run.get("variant", "")), plain(run.get("environment", "")),
                      plain(status, style), plain(run.get("stage") or ""),
                      plain(run.get("signature") or ""))
    return table


def print_runs(runs: list[dict[str, Any]], title: str | None = None,
               caption: str | None = None) -> None:
    """The runs as a table on stdout (`caption`: what they are over, below it), then the layer
    verdicts they carry."""
    console = Console(width=max(Console().width, 140))
    console.print(runs_table(runs, title, caption))
    for line in layer_lines(runs):
        console.print(plain(line))


def layer_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line per result that carries a layer verdict (docs/layers.md)."""
    return [f"layer of {result.get('variant')}@{result.get('environment')}: "
            f"{summary(LayerVerdict.model_validate(result['layer']))}"
            for result in results if result.get("layer")]


def error_console() -> Console:
    """Where messages for people go (an error stays one line: grep and logs read it whole)."""
    return Console(stderr=True, soft_wrap=True)


def reports_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input exits 2 with the message naming what is wrong; other faults exit 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BadInput as exc:
            error_console().print(f"[red]error:[/red] {escape(visible(str(exc)))}", highlight=False)
            sys.exit(EXIT_BAD_INPUT)
        except ReproError as exc:
            error_console().print(f"[red]error:[/red] {escape(visible(str(exc)))}", highlight=False)
            sys.exit(EXIT_FAILURE)

    return wrapper
