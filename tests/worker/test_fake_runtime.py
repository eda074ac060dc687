"""The FakeRuntime: its scripted outcomes come back through the real runner as results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tvmrepro.cases import parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.errors import RuntimeFault
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes import make_runtime
from worker.runtimes.fake import DIRECTIVE, FakeRuntime

ENV = default_catalog().get("tvm-0.27.0.post1-cpu")


def scripted(*outcomes: dict[str, Any]) -> dict[str, Any]:
    """A two-variant case whose directive lines script `outcomes`."""
    lines = "".join(f"{DIRECTIVE} {json.dumps(o)}\n" for o in outcomes)
    return {"source": f"{lines}x = 1\n", "variants": [
        {"name": "one", "passes": ["FuseTIR", "LambdaLift", "AllocateWorkspace"]},
        {"name": "two", "passes": ["FuseTIR"]}], "timeout_s": 2}


def run(tmp_path: Path, data: dict[str, Any], variant: str = "one") -> Result:
    """Run a variant with the fake runtime that TVMREPRO_RUNTIME=fake selects."""
    runtime = make_runtime("fake", Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                                       "TVMREPRO_RUNTIME": "fake"}))
    assert isinstance(runtime, FakeRuntime)
    return run_variant(parse_case(data), variant, ENV, runtime)


def test_without_a_directive_every_pass_runs_and_the_run_is_ok(tmp_path: Path) -> None:
    result = run(tmp_path, scripted())
    assert result.status == "ok" and result.tvm is not None
    assert (result.tvm["version"], result.tvm["packages"]) == (ENV.release, ENV.packages)
    assert [p.name for p in result.passes] == ["FuseTIR", "LambdaLift", "AllocateWorkspace"]
    assert result.isolation["runtime"] == "fake"


def test_a_directive_applies_to_its_variant_only(tmp_path: Path) -> None:
    data = scripted({"variant": "one", "status": "error", "stage": "pass:1:LambdaLift",
                     "error_type": "InternalError", "message": "boom"})
    failed = run(tmp_path, data)
    assert (failed.status, failed.stage, failed.signature) == (
        "error", "pass:1:LambdaLift", "InternalError: boom")
    assert [p.name for p in failed.passes] == ["FuseTIR"]  # the passes before the failing one
    assert run(tmp_path, data, "two").status == "ok"


@pytest.mark.parametrize(("outcome", "status", "error_type"), [
    ({"sleep": 3}, "timeout", "Timeout"),  # past the case's time limit of 2 s
    ({"signal": "SIGSEGV"}, "crash", "SIGSEGV"),
    ({"exit": 3}, "error", "Exit"),
])
def test_runs_that_end_without_a_result_are_classified(tmp_path: Path, outcome: dict[str, Any],
                                                       status: str, error_type: str) -> None:
    result = run(tmp_path, scripted(outcome))
    assert (result.status, result.error_type) == (status, error_type)


def test_a_scripted_fault_is_a_runtime_fault(tmp_path: Path) -> None:
    with pytest.raises(RuntimeFault, match="engine away"):
        run(tmp_path, scripted({"fault": "engine away"}))


def test_fingerprint_reads_like_a_provisioned_one(tmp_path: Path) -> None:
    facts = FakeRuntime(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)})).fingerprint(ENV)
    assert facts["packages"] == ENV.packages and facts["version"] == ENV.release
    assert {"FuseTIR", "LambdaLift", "AllocateWorkspace"} <= set(facts["passes"])
