"""What a run reports, on real TVM: module moves ported, the innermost pass, signatures that
survive a reworded message, the stage of a wrong result, and errors whatever the case did."""

from __future__ import annotations

import pytest

from tests.conftest import NEW_ENV, OLD_ENV, REPO
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm
CASES = REPO / "tests" / "cases"
MID_ENV = "tvm-0.26.0-cpu"  # between the two: struct_info is gone, arith is still there


@pytest.fixture(scope="module")
def env_026(settings: Settings) -> Environment:
    """tvm-0.26.0-cpu, provisioned (real TVM)."""
    from worker.environments.provision import provision

    env = default_catalog().get(MID_ENV)
    provision(settings, env)
    return env


def run_script(script: str, env: Environment, runtime: LocalRuntime) -> Result:
    """Run a report's script in the local sandbox."""
    return run_variant(parse_case({"script": script}), "script", env, runtime)


def run_case_script(name: str, env: Environment, runtime: LocalRuntime) -> Result:
    """Run tests/cases/<name> (a script) in the local sandbox."""
    return run_script((CASES / name).read_text(), env, runtime)


def test_arith_script_runs_on_027_as_if_written_for_it(tvm_envs: dict[str, Environment],
                                                        warm_runtime: LocalRuntime) -> None:
    ported = run_case_script("arith-analyzer/original.py", tvm_envs[NEW_ENV], warm_runtime)
    by_hand = run_case_script("arith-analyzer/for_027.py", tvm_envs[NEW_ENV], warm_runtime)
    assert ported.status == by_hand.status == "ok", ported.log.stderr[-2000:]
    assert ported.rewrites == ["arith-to-sym"] and by_hand.rewrites == []
    assert ported.log.stdout == by_hand.log.stdout and ported.log.stdout.endswith("True\n1\n")
    # And back: the script written for 0.27 runs on 0.25 through the reverse rule.
    back = run_case_script("arith-analyzer/for_027.py", tvm_envs[OLD_ENV], warm_runtime)
    assert (back.status, back.rewrites, back.log.stdout) == ("ok", ["sym-to-arith"], by_hand.log.stdout)


def test_each_release_gets_the_module_moves_it_needs(tvm_envs: dict[str, Environment],
                                                     env_026: Environment,
                                                     warm_runtime: LocalRuntime) -> None:
    envs = [tvm_envs[OLD_ENV], env_026, tvm_envs[NEW_ENV]]
    results = [run_case_script("module-moves/original.py", env, warm_runtime) for env in envs]
    assert [r.rewrites for r in results] == [
        [], ["relax-struct_info-to-relax-type", "struct_info-to-type"],
        ["arith-to-sym", "relax-struct_info-to-relax-type", "struct_info-to-type"]]
    assert {(r.status, r.log.stdout) for r in results} == {("ok", "2 float32\n7\n")}


def test_failure_inside_the_default_tir_pipeline_names_the_inner_pass(
        tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    for env in (OLD_ENV, NEW_ENV):
        result = run_case_script("tir-pipeline-no-target/original.py", tvm_envs[env], warm_runtime)
        assert result.status == "error", result.log.stderr[-2000:]
        assert result.stage == "pass:0:s_tir.LowerThreadAllreduce"
        assert result.pass_path == ["_pipeline", "s_tir.LowerThreadAllreduce"]
        assert "Require the target attribute" in (result.message or "")


def test_reworded_message_keeps_its_signature(tvm_envs: dict[str, Environment],
                                              env_026: Environment, warm_runtime: LocalRuntime) -> None:
    old, mid, new = (run_case_script("reworded-vm-codegen/original.py", env, warm_runtime)
                     for env in (tvm_envs[OLD_ENV], env_026, tvm_envs[NEW_ENV]))
    assert {(r.status, r.stage) for r in (old, mid, new)} == {("error", "build")}
    # 0.25 and 0.26 print the operator with its fields (struct_info_=None, then ty=ir.Type(...)).
    assert "struct_info_=None" in (old.message or "") and "ty=ir.Type" in (mid.message or "")
    assert old.signature_message == mid.signature_message == \
        "CodeGenVM cannot handle this intrinsic now: Op(relax.add)"
    # 0.27 rewords the message; the C++ function that raises it is the same.
    assert "cannot emit this Relax operator" in (new.message or "")
    assert old.signature_frame == new.signature_frame == "CodeGenVM::VisitExpr_"
    assert old.signature == mid.signature == new.signature == "InternalError at CodeGenVM::VisitExpr_"


def test_founding_case_signature_is_anchored_on_its_frame(tvm_envs: dict[str, Environment],
                                                          warm_runtime: LocalRuntime) -> None:
    script = (REPO / "tests" / "cases" / "tvm-17357" / "original.py").read_text()
    old, new = (run_script(script, tvm_envs[e], warm_runtime) for e in (OLD_ENV, NEW_ENV))
    for result in (old, new):
        assert (result.status, result.stage) == ("error", "vm_init"), result.log.stderr[-2000:]
        assert result.signature_frame == "VirtualMachineImpl::InitFuncPool"
    assert old.signature == new.signature
    assert "fused_relax_nn_attention_cutlass_gv" in (old.signature or "")


def test_wrong_result_is_an_error_at_run(tvm_envs: dict[str, Environment],
                                         warm_runtime: LocalRuntime) -> None:
    wrong = run_case_script("wrong-result-adaptive-avg-pool2d/original.py", tvm_envs[OLD_ENV], warm_runtime)
    assert (wrong.status, wrong.stage, wrong.error_type) == ("error", "run", "AssertionError")
    assert (wrong.message or "").startswith("adaptive_avg_pool2d differs from numpy")
    fixed = run_case_script("wrong-result-adaptive-avg-pool2d/original.py", tvm_envs[NEW_ENV], warm_runtime)
    assert (fixed.status, fixed.stage) == ("ok", "run")


def test_errors_before_any_tvm_step_stay_at_script(tvm_envs: dict[str, Environment],
                                                   warm_runtime: LocalRuntime) -> None:
    result = run_script("import tvm\nassert 1 == 2, 'checked first'\n", tvm_envs[NEW_ENV], warm_runtime)
    assert (result.status, result.stage, result.error_type) == ("error", "script", "AssertionError")


def test_parser_errors_in_a_script_are_stage_parse(tvm_envs: dict[str, Environment],
                                                   warm_runtime: LocalRuntime) -> None:
    script = ("from tvm.script import ir as I, relax as R\n\n@I.ir_module\nclass M:\n"
              "    @R.function\n    def main(x: R.Tensor((4,), 'float32')):\n"
              "        return R.nn.relu(x, x, x)\n")
    result = run_script(script, tvm_envs[NEW_ENV], warm_runtime)
    assert (result.status, result.stage, result.error_type) == ("error", "parse", "DiagnosticError")
    assert "relu() takes 1 positional argument" in (result.message or "")


def test_a_case_that_closes_stderr_still_reports_its_error(tvm_envs: dict[str, Environment],
                                                           warm_runtime: LocalRuntime) -> None:
    script = "import sys\nsys.stderr.close()\nraise ValueError('the real error')\n"
    result = run_script(script, tvm_envs[NEW_ENV], warm_runtime)
    assert (result.status, result.error_type, result.message) == ("error", "ValueError", "the real error")
    assert "the real error" in result.log.stderr  # the traceback went to the descriptor itself


def test_a_script_for_026_with_types_as_struct_info_runs_on_025(
        tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    # relax.TensorType is the struct info since 0.26; on 0.25 it is a type of ndim and dtype,
    # and the script failed there with a TypeError at `script`, grouped as a second bug.
    script = ("from tvm import relax\n"
              "x = relax.Var('x', relax.TensorType((2, 3), 'float32'))\n"
              "bb = relax.BlockBuilder()\n"
              "with bb.function('main', [x]):\n"
              "    bb.emit_func_output(bb.emit(relax.op.add(x, x)))\n"
              "print(x.ty.ndim)\n")
    results = [run_script(script, tvm_envs[env], warm_runtime) for env in (OLD_ENV, NEW_ENV)]
    assert [(r.status, r.log.stdout) for r in results] == [("ok", "2\n")] * 2, \
        results[0].log.stderr[-2000:]
    assert [r.rewrites for r in results] == [["type-to-struct_info"], []]
