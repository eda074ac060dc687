"""`tvmrepro extract` and `tvmrepro reduce` end to end on real TVM, and the reduced cases checked
by running them again (`tvmrepro run --local`), not by the reducer's word.

Cases: the founding report (apache/tvm#17357, fails at VM creation) and two more real reports
that fail at the build on the current release (tests/cases/tvm-17406, tests/cases/tvm-20192).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli_local import tvmrepro
from tests.conftest import NEW_ENV, REPO

pytestmark = pytest.mark.tvm
CASES = REPO / "tests" / "cases"
BUDGET_S = "600"  # within pytest's 900 s per test; on a loaded machine: the best case so far
# The founding case never finishes its sweeps within that (574 s measured); two minutes drop
# FuseTIR and the unused functions already (16 lines after 60 s), which is what is checked.
FOUNDING_BUDGET_S = "120"


def cli_json(*args: str, home: Path) -> dict[str, Any]:
    """Run a tvmrepro command that prints JSON; it must succeed."""
    proc = tvmrepro(*args, "--json", home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def run_signature(case: dict[str, Any], tmp: Path, home: Path) -> dict[str, Any]:
    """The case (a dict) run as it is: its one run's result."""
    path = tmp / "case.json"
    path.write_text(json.dumps(case))
    runs = cli_json("run", str(path), "--local", "--env", NEW_ENV, home=home)["runs"]
    assert len(runs) == 1
    return runs[0]


def pass_names(case: dict[str, Any]) -> list[str]:
    return [p if isinstance(p, str) else p["name"] for p in case["variants"][0]["passes"]]


@pytest.fixture(scope="module")
def founding_reduced(tvm_envs: dict, test_home: Path, tmp_path_factory: pytest.TempPathFactory,
                     ) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("founding") / "reduced.json"
    found = cli_json("reduce", str(CASES / "tvm-17357" / "case.json"), "--env", NEW_ENV,
                     "--variant", "fusetir-once", "--local", "--budget-s", FOUNDING_BUDGET_S,
                     "-o", str(out), home=test_home)
    assert json.loads(out.read_text()) == found["case"]
    return found


def test_founding_case_reduces_to_at_most_its_three_passes_and_fewer_lines(
        founding_reduced: dict[str, Any]) -> None:
    found = founding_reduced
    assert found["oracle"] == "signature"
    assert found["before"] == {"passes": 3, "lines": found["before"]["lines"]}
    assert found["after"]["passes"] <= 3
    assert found["after"]["lines"] < found["before"]["lines"]
    assert found["steps"] >= 1
    # ddmin keeps a 1-minimal pass list: every pass left is needed for the bug.
    assert {"LambdaLift", "AllocateWorkspace"} <= set(pass_names(found["case"]))
    assert "fused_relax_nn_attention_cutlass" in found["case"]["source"]


def test_founding_reduced_case_gives_the_same_signature_when_run(
        founding_reduced: dict[str, Any], test_home: Path, tmp_path: Path) -> None:
    original = run_signature(json.loads((CASES / "tvm-17357" / "case.json").read_text())
                             | {"variants": [{"name": "fusetir-once",
                                              "passes": ["FuseTIR", "LambdaLift",
                                                         "AllocateWorkspace"]}]},
                             tmp_path, test_home)
    reduced = run_signature(founding_reduced["case"], tmp_path, test_home)
    assert reduced["status"] == original["status"] == "error"
    assert reduced["signature"] == original["signature"] == founding_reduced["signature"]


def test_extract_of_the_founding_script_gives_its_module_and_three_passes(
        tvm_envs: dict, test_home: Path) -> None:
    found = cli_json("extract", str(CASES / "tvm-17357" / "original.py"), "--env", NEW_ENV,
                     "--local", home=test_home)
    assert found["stage"] == "vm_init" and found["reproduces"] is True
    assert pass_names(found["case"]) == ["FuseTIR", "LambdaLift", "AllocateWorkspace"]
    assert found["case"]["opt_level"] == 4 and found["case"]["target"] == "llvm"
    assert found["case_run"]["signature"] == found["signature"]


# tvm-17406's module is already minimal for the reducer's edits (see its NOTES.md): it keeps
# its lines and only its shapes shrink.
@pytest.mark.parametrize(("report", "stage", "fewer_lines"),
                         [("tvm-17406", "build", False), ("tvm-20192", "build", True)])
def test_real_report_extracts_and_reduces_keeping_the_script_signature(
        report: str, stage: str, fewer_lines: bool, tvm_envs: dict, test_home: Path,
        tmp_path: Path) -> None:
    script = CASES / report / "original.py"
    script_run = cli_json("run", str(script), "--local", "--env", NEW_ENV,
                          home=test_home)["runs"][0]
    assert script_run["status"] == "error" and script_run["stage"] == stage

    extracted = cli_json("extract", str(script), "--env", NEW_ENV, "--local",
                         "-o", str(tmp_path / "extracted.json"), home=test_home)
    assert extracted["signature"] == script_run["signature"]
    assert run_signature(extracted["case"], tmp_path, test_home)["signature"] == \
        script_run["signature"]

    reduced = cli_json("reduce", str(tmp_path / "extracted.json"), "--env", NEW_ENV, "--local",
                       "--budget-s", BUDGET_S, home=test_home)
    assert reduced["after"]["lines"] <= reduced["before"]["lines"]
    if fewer_lines:
        assert reduced["after"]["lines"] < reduced["before"]["lines"]
    else:
        assert reduced["case"]["source"] != extracted["case"]["source"]  # smaller shapes
    rerun = run_signature(reduced["case"], tmp_path, test_home)
    assert rerun["status"] == "error" and rerun["signature"] == script_run["signature"]


def test_a_script_that_fails_before_any_tvm_step_cannot_be_extracted(
        tvm_envs: dict, test_home: Path, tmp_path: Path) -> None:
    script = tmp_path / "early.py"
    script.write_text("import tvm\nraise RuntimeError('the model file is missing')\n")
    proc = tvmrepro("extract", str(script), "--env", NEW_ENV, "--local", home=test_home)
    assert proc.returncode == 2
    assert "before any TVM pass, build or VM creation" in proc.stderr
