"""One answer numbers passes one way: from 0, as a failing run's stage `pass:<index>:<Name>` does.

A job of the real API (Flask on a werkzeug server in a thread, its own home) gets two results
as a worker would store them: `once` runs FuseTIR, LambdaLift, AllocateWorkspace and fails at
the VM's creation on a function LambdaLift made; `twice` fails at its fourth pass, stage
`pass:3:AllocateWorkspace`. Their IR first differs after pass 2. What `wait` (the end of
`run`), `ir`, `compare` and the report print all say so, and say which way they count.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from cli.cli import main
from service.jobs import JobService
from tests.conftest import NEW_ENV
from tests.service.stack import api_in_thread
from tvmrepro.jobs.settling import finish_run
from tvmrepro.results import FunctionInfo, PassRecord, Result, Status

SYMBOL = "fused_attention_gv"
STEP_NUMBER = re.compile(r"\bstep \d|\(\d\)")  # a pass numbered any other way
FROM_ZERO = re.compile(r"[Pp]asses count from 0, as in the stage `?pass:<index>:<Name>")


def _passes(names: list[str], irs: list[str]) -> list[PassRecord]:
    """Records of passes, `SYMBOL` in the module from the second one (LambdaLift) on."""
    return [PassRecord(index=i, name=name, seconds=0.01, ir=ir, functions=[
        FunctionInfo(name=f, kind="Function") for f in ["main", SYMBOL][:1 + (i >= 1)]])
        for i, (name, ir) in enumerate(zip(names, irs, strict=True))]


@pytest.fixture
def finished_job(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The URL of a real API and the id of a finished two-variant job."""
    with api_in_thread(tmp_path / "service") as (url, service):
        yield url, finished(url, service)


def finished(url: str, service: JobService) -> str:
    """A two-variant job submitted to the API at `url`, its results stored."""
    case = {"source": "from tvm.script import ir as I\n", "variants": [
        {"name": "once", "passes": ["FuseTIR", "LambdaLift", "AllocateWorkspace"]},
        {"name": "twice", "passes": ["FuseTIR", "LambdaLift", "FuseTIR", "AllocateWorkspace"]}]}
    job: dict[str, Any] = httpx.post(f"{url}/api/v1/jobs", json={
        "case": case, "environments": [NEW_ENV], "wait": True}).json()
    once, twice = job["runs"]
    finish_run(service.store, job["id"], once["id"], Result(
        environment=NEW_ENV, variant="once", status=Status.ERROR, stage="vm_init",
        error_type="InternalError", message=f"Cannot find function {SYMBOL}",
        passes=_passes(["FuseTIR", "LambdaLift", "AllocateWorkspace"], ["a", "b", "c"])))
    finish_run(service.store, job["id"], twice["id"], Result(
        environment=NEW_ENV, variant="twice", status=Status.ERROR,
        stage="pass:3:AllocateWorkspace", error_type="InternalError", message="Check failed",
        passes=_passes(["FuseTIR", "LambdaLift", "FuseTIR"], ["a", "b", "d"])))
    return str(job["id"])


def _command(url: str, *args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--server", url], catch_exceptions=False)
    assert result.exit_code == 0, (args, result.output)
    return str(result.stdout)


def test_every_answer_counts_passes_from_0_as_the_stage_does(
        finished_job: tuple[str, str]) -> None:
    url, job_id = finished_job
    matrix = _command(url, "wait", job_id)
    assert "pass:3:AllocateWorkspace" in matrix
    assert "IR first differs after pass 2 (AllocateWorkspace / FuseTIR)" in matrix
    assert "appears after LambdaLift (pass 1)" in matrix

    compared = _command(url, "compare", job_id, f"once@{NEW_ENV}", f"twice@{NEW_ENV}")
    assert "first differ after pass 2 (AllocateWorkspace / FuseTIR)" in compared
    assert f"once@{NEW_ENV} after pass 2 (AllocateWorkspace)" in compared  # the diff's header

    ir = _command(url, "ir", job_id, f"once@{NEW_ENV}", "--pass", "2")
    assert "# after pass 2: AllocateWorkspace\nc" in ir and "after pass 1" not in ir
    assert _command(url, "ir", job_id, f"once@{NEW_ENV}", "--step", "3") == ir  # as it was
    for wrong, said in ((["--step", "0"], "steps 1 to 3"), (["--pass", "3"], "passes 0 to 2"),
                        (["--pass", "1", "--step", "2"], "not both")):
        refused = CliRunner().invoke(main, ["ir", job_id, f"once@{NEW_ENV}", *wrong,
                                            "--server", url])
        assert refused.exit_code == 2 and said in refused.stderr, (wrong, refused.output)

    report = _command(url, "report", job_id, "--markdown")
    assert "`pass:3:AllocateWorkspace`" in report
    assert "first differ after pass 2: `AllocateWorkspace` in `once`, `FuseTIR` in `twice`" \
        in report
    assert "appears after LambdaLift (pass 1)" in report

    for answer in (matrix, compared, ir, report):
        assert FROM_ZERO.search(answer), answer  # where the reader reads the numbers
        assert STEP_NUMBER.findall(answer) == [], answer
