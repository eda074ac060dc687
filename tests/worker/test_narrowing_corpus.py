"""The narrowing corpus: real apache/tvm reports, each extracted and reduced on the newest release
(real TVM, the session's warm runtime, small budgets), and the reduced case run again.

The README's table ("Narrowing: extract and reduce") has every report on every release where it
fails; the reports other tests already narrow are not repeated here (tvm-17357, tvm-17406 and
tvm-20192 in tests/cli/test_extract_reduce.py, tvm-20195 and tvm-20200 in
test_narrowing_wild.py). Each case's NOTES.md says what plain TVM gives on each release.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.conftest import NEW_ENV, REPO
from tvmrepro.cases import load_case_file, parse_case
from tvmrepro.environments import Environment
from worker.narrowing.extraction import extract
from worker.narrowing.reduction import Options, reduce_case
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm
CASES = REPO / "tests" / "cases"
# Enough for the reductions that finish (measured through the command line on this loaded
# machine: 9 to 20 s each); tvm-17479's takes 46 to 139 s, so it gets less and keeps the best
# case so far (what is checked is that that case, run again, still gives the signature).
BUDGET_S = 45
SHORT_BUDGET_S = 20


@dataclass(frozen=True)
class Report:
    """What the script gives on NEW_ENV, and what its extracted case is."""

    name: str
    stage: str
    signature: str
    passes: tuple[str, ...]
    lines: int  # the extracted module's non-blank lines
    finishes: bool  # the reduction finishes within BUDGET_S: then the lines it ends with
    reduced_lines: int | None = None
    budget_s: int = BUDGET_S


CORPUS = [
    # call_tir with an R.Prim scalar argument; a Relax pass that looks into PrimFuncs.
    Report("tvm-20420", "pass:0:SpecializePrimFuncBasedOnCallSite",
           "InternalError at SpecializeTIRCallArgs::SpecializeTirPrimFunc",
           ("SpecializePrimFuncBasedOnCallSite",), 15, True, 14),
    # A closure inside a dataflow block.
    Report("tvm-20419", "pass:0:ToMixedPrecision", "InternalError at NTypeFrom",
           ("ToMixedPrecision",), 14, True, 14),
    # A pass inside the LLVM target's default pipeline (the case starts at that pass).
    Report("tvm-20194", "pass:0:FuseTIRInner", "InternalError at FusedTIRConstructor::ConstructFunc",
           ("FuseTIR",), 20, False),
    # Symbolic shapes: 0.27 prints the module as TVMScript that does not parse back; the build.
    Report("tvm-17479", "build", "InternalError at VMShapeLowerMutator::MakeSymbolicShapeArg",
           ("InlinePrivateFunctions",), 33, False, budget_s=SHORT_BUDGET_S),
]


def pass_names(case: dict) -> tuple[str, ...]:
    return tuple(p if isinstance(p, str) else p["name"] for p in case["variants"][0]["passes"])


@pytest.mark.parametrize("report", CORPUS, ids=[r.name for r in CORPUS])
def test_report_extracts_and_reduces_keeping_the_script_signature(
        report: Report, tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    env = tvm_envs[NEW_ENV]
    found = extract(load_case_file(CASES / report.name / "original.py"), env,
                    warm_runtime).model_dump(mode="json")
    assert (found["stage"], found["signature"]) == (report.stage, report.signature)
    assert found["reproduces"], found["case_run"]
    case = found["case"]
    assert pass_names(case) == report.passes
    assert sum(1 for line in case["source"].splitlines() if line.strip()) == report.lines

    reduced = reduce_case(parse_case(case), Options(env=env, variant="extracted",
                                                    budget_s=report.budget_s),
                          warm_runtime).model_dump(mode="json")
    assert reduced["signature"] == report.signature
    assert reduced["before"] == {"passes": len(report.passes), "lines": report.lines}
    assert pass_names(reduced["case"]) == report.passes  # the failing pass is needed
    if report.finishes:
        assert reduced["finished"], reduced["log"]
        assert reduced["after"]["lines"] == report.reduced_lines, reduced["log"]
    again = run_variant(parse_case(reduced["case"]), "extracted", env, warm_runtime).to_json()
    assert (again["status"], again["stage"], again["signature"]) == (
        "error", report.stage, report.signature)
