"""`tvmrepro`: the click group and its commands, one module of cli/commands/ per group of them."""

from __future__ import annotations

import gc
import sys

import click

from cli.commands.bisect import bisect_command
from cli.commands.env import env
from cli.commands.history import history
from cli.commands.images import images
from cli.commands.jobs import (
    cancel_command,
    compare_command,
    ir_command,
    jobs_command,
    log_command,
    report_command,
    wait_command,
)
from cli.commands.narrowing import extract_command, reduce_command
from cli.commands.new import new_command
from cli.commands.run import run_command
from cli.commands.service import serve_command, up_command, worker_command
from cli.commands.sweep import sweep_command
from cli.commands.tracker import export_test_command, import_command, triage_command


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


for command in (env, run_command, serve_command, worker_command, up_command, new_command,
                report_command, images, bisect_command, extract_command, reduce_command,
                jobs_command, wait_command, log_command, ir_command, compare_command,
                cancel_command, import_command, triage_command, export_test_command,
                sweep_command, history):
    main.add_command(command)
