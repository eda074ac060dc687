"""Extraction's choice of module and passes from recorded steps (no TVM)."""

from __future__ import annotations

from typing import Any

import pytest

from tvmrepro.cases import parse_case
from tvmrepro.results import Result, Status
from worker.narrowing.extraction import CannotExtract, case_from_steps, chain

SCRIPT = parse_case({"title": "repro.py", "script": "print(1)", "timeout_s": 60})


def step(index: int, kind: str, name: str, link: int | None, **extra: Any) -> dict[str, Any]:
    return {"index": index, "kind": kind, "name": name, "link": link, "opt_level": 3,
            "ir": f"module before step {index}\n", "args": {}, **extra}


def failed(stage: str) -> Result:
    return Result(environment="tvm-x", variant="script", status=Status.ERROR, stage=stage,
                  signature="E: boom")


# A module parsed, then an unrelated pass on another module, then two passes chained into a build.
STEPS = [step(0, "pass", "Normalize", None), step(1, "pass", "FuseTIR", None),
         step(2, "pass", "LambdaLift", 1), step(3, "build", "build", 2, target="llvm")]


def test_chain_follows_outputs_back_to_the_first_pass() -> None:
    assert [s["name"] for s in chain(STEPS[3], STEPS)] == ["FuseTIR", "LambdaLift"]


def test_a_build_failure_starts_where_its_chain_starts() -> None:
    case, notes = case_from_steps(SCRIPT, failed("vm_init"), STEPS)
    assert case["source"] == "module before step 1\n"
    assert case["variants"][0]["passes"] == ["FuseTIR", "LambdaLift"]
    assert case["target"] == "llvm" and case["entry"] is None and case["timeout_s"] == 60
    assert notes == []
    at_step, _notes = case_from_steps(SCRIPT, failed("build"), STEPS, at="failing")
    assert at_step["source"] == "module before step 3\n"
    assert at_step["variants"][0]["passes"] == []


def test_a_pass_failure_ends_with_that_pass_and_its_arguments() -> None:
    steps = STEPS[:3] + [step(3, "pass", "FuseOps", 2, args={"fuse_opt_level": 2},
                              dropped_args=["patterns"])]
    case, notes = case_from_steps(SCRIPT, failed("pass:3:FuseOps"), steps)
    assert case["variants"][0]["passes"][-1] == {"name": "FuseOps", "args": {"fuse_opt_level": 2}}
    assert notes and "patterns" in notes[0]


def test_a_pipeline_that_a_case_cannot_name_gives_way_to_the_pass_inside_it() -> None:
    steps = [step(0, "pass", "_pipeline", None, resolvable=False)]
    inner = {"kind": "pass", "name": "FoldConstant", "args": {}, "opt_level": 2,
             "ir": "module before FoldConstant\n"}
    case, _notes = case_from_steps(SCRIPT, failed("pass:0:FoldConstant"), steps, inner=inner)
    assert case["source"] == "module before FoldConstant\n"
    assert case["variants"][0]["passes"] == ["FoldConstant"] and case["opt_level"] == 2


@pytest.mark.parametrize(("result", "steps", "why"), [
    (Result(environment="tvm-x", variant="script", status=Status.OK, stage="script"), STEPS,
     "not with a failure"),
    (failed("script"), [], "before any TVM pass"),
    (failed("run"), STEPS, "no module"),
])
def test_cannot_extract_says_why(result: Result, steps: list, why: str) -> None:
    with pytest.raises(CannotExtract, match=why) as info:
        case_from_steps(SCRIPT, result, steps)
    assert info.value.field == "SCRIPT"


def test_a_pipeline_is_spelled_out_as_the_passes_run_inside_it() -> None:
    children = [{"name": "LegalizeOps", "resolvable": True, "args": {}},
                {"name": "FoldConstant", "resolvable": True, "args": {}}]
    steps = [step(0, "pass", "_pipeline", None, resolvable=False, children=children)]
    inner = {"kind": "pass", "name": "FoldConstant", "args": {}, "opt_level": 2,
             "ir": "module before FoldConstant\n"}
    case, _notes = case_from_steps(SCRIPT, failed("pass:0:FoldConstant"), steps, inner=inner)
    assert case["source"] == "module before step 0\n"
    assert case["variants"][0]["passes"] == ["LegalizeOps", "FoldConstant"]
    unnamed = children + [{"name": "ApplyDefaultSchedule", "resolvable": False, "args": {}}]
    steps[0]["children"] = unnamed
    case, _notes = case_from_steps(SCRIPT, failed("pass:0:FoldConstant"), steps, inner=inner)
    assert case["source"] == "module before FoldConstant\n"


def test_a_build_keeps_the_scripts_options_and_config() -> None:
    build = step(3, "build", "build", 2, target="llvm", config={"relax.x": True},
                 options={"exec_mode": "compiled", "relax_pipeline": None,
                          "unnamed": ["tir_pipeline"]})
    case, notes = case_from_steps(SCRIPT, failed("build"), [*STEPS[:3], build])
    assert (case["exec_mode"], case["relax_pipeline"]) == ("compiled", None)
    assert "tir_pipeline" not in case and case["pass_config"] == {"relax.x": True}
    assert notes == ["tir_pipeline was given as a Pass object, which a case cannot carry: "
                     "left at 'default'"]
    assert parse_case({**case, "source": "x = 1\n"}).exec_mode == "compiled"


def test_a_module_that_does_not_parse_back_carries_its_fallbacks() -> None:
    script = parse_case({"script": "import tvm\nfrom tvm.script import ir as I\n\nx = 1\n\n\n"
                                   "@I.ir_module\nclass Mod:\n    pass\n\n\nmod = Mod\n"})
    steps = [step(0, "pass", "FuseOps", None, parse_error="NameError: n", well_formed=False,
                  defined_as=["mod", "Mod"]), step(1, "build", "build", 0)]
    case, notes = case_from_steps(script, failed("build"), steps)
    assert case["parse_error"] == "NameError: n" and case["start_step"] == [0, "FuseOps"]
    # `mod` may have been bound again since; the class is the script's own source.
    assert case["script_module"] == [
        "Mod", "import tvm\nfrom tvm.script import ir as I\n\n\n@I.ir_module\nclass Mod:\n"
               "    pass\n"]
    assert case["title"].endswith("(module not well formed)")
    assert any("check_well_formed=False" in note for note in notes)
