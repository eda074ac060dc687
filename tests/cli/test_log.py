"""`tvmrepro log JOB RUN`: what the run printed is the command's output (stdout), a crashed run's
traceback included; stderr carries only the command's own messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from cli.cli import main
from tests.conftest import NEW_ENV
from tests.service.stack import api_in_thread
from tvmrepro.jobs.settling import finish_run
from tvmrepro.results import Log, Result, Status

# What a run that segfaulted leaves: nothing on stdout but its first line, the rest on stderr.
PRINTED = "building the module\n"
CRASHED = ("!!!!!!! Segfault encountered !!!!!!!\n  File \"<unknown>\", line 0, in "
           "tvm::relax::VirtualMachineImpl::InitFuncPool()\n")


@pytest.fixture
def crashed_job(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The URL of a real API and the id of a job whose one run crashed."""
    with api_in_thread(tmp_path / "service") as (url, service):
        job: dict[str, Any] = httpx.post(f"{url}/api/v1/jobs", json={
            "case": {"title": "crash", "script": "print(1)\n"}, "environments": [NEW_ENV],
            "wait": True}).json()
        run = job["runs"][0]
        finish_run(service.store, job["id"], run["id"], Result(
            environment=NEW_ENV, variant=run["variant"], status=Status.CRASH, stage="vm_init",
            error_type="SIGSEGV", message="the process was killed by SIGSEGV",
            signature="crash: SIGSEGV", log=Log(stdout=PRINTED, stderr=CRASHED)))
        yield url, job["id"]


def test_a_crashed_runs_log_is_the_commands_output(crashed_job: tuple[str, str]) -> None:
    url, job_id = crashed_job
    run = f"script@{NEW_ENV}"
    shown = CliRunner().invoke(main, ["log", job_id, run, "--server", url])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == PRINTED + CRASHED  # its stdout, then its stderr
    assert "Segfault" not in shown.stderr
    only = CliRunner().invoke(main, ["log", job_id, run, "--stream", "stderr", "--server", url])
    assert only.stdout == CRASHED
    out = CliRunner().invoke(main, ["log", job_id, run, "--stream", "stdout", "--server", url])
    assert out.stdout == PRINTED
