"""What a run wrote reaches the terminal with its control characters shown, not obeyed.

A job of the real API (Flask on a werkzeug server in a thread, its own home) gets the result a
hostile run would leave in the store (an error type, stage, message, log, pass names and IR full
of terminal escapes: window title, clear screen, clipboard write, hidden text); every command
that prints it writes no ESC, BEL or C1 byte. One real run through the warm sandbox raises an
exception whose class name is such text, and the table `tvmrepro run --local` prints shows it
escaped.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from rich.console import Console

from cli.cli import main
from cli.output import runs_table
from tests.conftest import NEW_ENV
from tests.service.stack import api_in_thread
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.jobs.settling import finish_run
from tvmrepro.results import Log, PassRecord, Result, Status
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

TERMINAL = "\x1b]0;owned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x1b[8mhidden\x1b[0m\x9b31m"
EVIL = (f"x\n```\n# Fixed: please close [link](https://evil.example) <img src=x> [bold]"
        f"{TERMINAL}")
RAW = re.compile("[\x07\x1b\x9b]")


@pytest.fixture
def crafted_job(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The URL of a real API and the id of a job whose one run has a crafted result."""
    with api_in_thread(tmp_path / "service") as (url, service):
        job: dict[str, Any] = httpx.post(f"{url}/api/v1/jobs", json={
            "case": {"title": EVIL, "script": "print(1)\n"}, "environments": [NEW_ENV],
            "wait": True}).json()
        run = job["runs"][0]
        finish_run(service.store, job["id"], run["id"], Result(
            environment=NEW_ENV, variant=run["variant"], status=Status.ERROR, stage=EVIL,
            error_type=EVIL, message=EVIL, signature=EVIL, rewrites=[EVIL], reproducer=EVIL,
            passes=[PassRecord(index=0, name=EVIL, seconds=0.1, functions=[], ir=EVIL)],
            log=Log(stdout=EVIL, stderr=EVIL)))
        yield url, job["id"]


def test_no_command_prints_a_raw_escape_from_a_run(crafted_job: tuple[str, str]) -> None:
    url, job_id = crafted_job
    run = f"script@{NEW_ENV}"
    commands = [["report", job_id, "--markdown"], ["report", job_id], ["jobs"],
                ["log", job_id, run], ["ir", job_id, run], ["wait", job_id]]
    for command in commands:
        result = CliRunner().invoke(main, [*command, "--server", url], catch_exceptions=False)
        assert result.exit_code == 0, (command, result.output)
        printed = result.stdout + result.stderr
        assert "owned" in printed, command  # the run's text is shown ...
        assert RAW.findall(printed) == [], command  # ... with its escapes visible
    log = CliRunner().invoke(main, ["log", job_id, run, "--server", url])
    assert "\\x1b]0;owned\\x07" in log.stdout and "\n# Fixed" in log.stdout  # lines kept


def test_the_job_page_escapes_the_title(crafted_job: tuple[str, str]) -> None:
    url, job_id = crafted_job
    page = httpx.get(f"{url}/jobs/{job_id}").text
    assert "<img src=x>" not in page and "&lt;img src=x&gt;" in page


@pytest.mark.tvm
def test_a_real_runs_crafted_exception_is_shown_escaped(tvm_envs: dict[str, Environment],
                                                        warm_runtime: LocalRuntime) -> None:
    script = f"raise type({EVIL!r}, (Exception,), {{}})({EVIL!r})\n"
    result = run_variant(parse_case({"script": script}), "script", tvm_envs[NEW_ENV],
                         warm_runtime)
    assert result.status == "error" and "\x1b]0;owned" in (result.error_type or "")
    console = Console(file=io.StringIO(), record=True, width=200, color_system=None)
    console.print(runs_table([result.to_json()], title=EVIL))
    shown = console.export_text()
    assert "\\x1b]0;owned\\x07" in shown and "[bold]" in shown  # escaped, and no markup
    assert RAW.findall(shown) == []
