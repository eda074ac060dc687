"""Where a run ends and how, on real TVM: a pass, build, vm_init, run; CPU time; tuples; shapes.

Each case is small and names the stage it must end in; the fused FuseTIR case of
tests/cases runs on one environment of each minor release (0.25, 0.26, 0.27).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.conftest import NEW_ENV, REPO
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm
HEAD = ("from tvm.script import ir as I\nfrom tvm.script import relax as R\n"
        "from tvm.script import tir as T\n\n@I.ir_module\nclass Module:\n")
ADD = HEAD + '''    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            gv = R.add(x, x)
            R.output(gv)
        return gv
'''
TUPLE = HEAD + '''    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            gv = (R.add(x, y), R.multiply(x, y))
            R.output(gv)
        return gv
'''
SYMBOLIC = HEAD + '''    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        with R.dataflow():
            gv = R.add(x, x)
            R.output(gv)
        return gv
'''
# The symbolic dimension is bound at run time; a constant it cannot match fails there.
MISMATCH = HEAD + '''    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            y = R.match_cast(x, R.Tensor((3, 4), "float32"))
            gv = R.add(y, y)
            R.output(gv)
        return gv
'''
MISSING_FUNCTION = HEAD + '''    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32")):
        gv = R.call_packed("tvmrepro.no_such_function", x, sinfo_args=R.Tensor((2, 3), "float32"))
        return gv
'''
ONE_RELEASE_EACH = ("tvm-0.25.0.post1-cpu", "tvm-0.26.0-cpu", "tvm-0.27.0.post1-cpu")


def run(runtime: LocalRuntime, env: Environment, source: str, passes: list[str] | None = None,
        entry: str | None = "main") -> Result:
    """One variant "v" of a source case, with the passes given, in the local sandbox."""
    case = parse_case({"source": source, "entry": entry,
                       "variants": [{"name": "v", "passes": passes or []}]})
    return run_variant(case, "v", env, runtime)


def seeded(*shapes: tuple[int, ...]) -> list[Any]:
    """The inputs the harness makes: standard normal float32 from seed 0, in order."""
    rng = np.random.RandomState(0)
    return [rng.standard_normal(shape).astype("float32") for shape in shapes]


def test_a_failure_inside_a_pass_names_the_pass(tvm_envs: dict[str, Environment],
                                                warm_runtime: LocalRuntime) -> None:
    result = run(warm_runtime, tvm_envs[NEW_ENV], ADD, ["LegalizeOps", "MetaScheduleApplyDatabase"])
    assert (result.status, result.stage) == ("error", "pass:1:MetaScheduleApplyDatabase")
    assert result.error_type == "InternalError"
    assert "Target context required" in (result.message or "")
    assert [p.name for p in result.passes] == ["LegalizeOps"]  # the IR after the last good one


def test_a_missing_function_fails_at_vm_init(tvm_envs: dict[str, Environment],
                                             warm_runtime: LocalRuntime) -> None:
    result = run(warm_runtime, tvm_envs[NEW_ENV], MISSING_FUNCTION)
    assert (result.status, result.stage, result.error_type) == ("error", "vm_init",
                                                                "InternalError")
    assert "Cannot find ffi::Function tvmrepro.no_such_function" in (result.message or "")


def test_a_failure_while_running_is_in_run(tvm_envs: dict[str, Environment],
                                           warm_runtime: LocalRuntime) -> None:
    result = run(warm_runtime, tvm_envs[NEW_ENV], MISMATCH)
    assert (result.status, result.stage) == ("error", "run")
    assert "match_cast" in (result.message or "") and result.outputs is None


def test_tuple_outputs_are_each_summarised(tvm_envs: dict[str, Environment],
                                           warm_runtime: LocalRuntime) -> None:
    result = run(warm_runtime, tvm_envs[NEW_ENV], TUPLE)
    assert (result.status, result.stage) == ("ok", "run"), result.log.stderr[-2000:]
    x, y = seeded((2, 3), (2, 3))
    assert isinstance(result.outputs, list) and len(result.outputs) == 2
    for output, expected in zip(result.outputs, (x + y, x * y), strict=True):
        assert output["shape"] == [2, 3] and output["dtype"] == "float32"
        assert output["sum"] == pytest.approx(float(expected.astype(np.float64).sum()), rel=1e-5)


def test_a_symbolic_shape_gets_a_concrete_input(tvm_envs: dict[str, Environment],
                                                warm_runtime: LocalRuntime) -> None:
    result = run(warm_runtime, tvm_envs[NEW_ENV], SYMBOLIC)
    assert (result.status, result.stage) == ("ok", "run"), result.log.stderr[-2000:]
    assert isinstance(result.outputs, dict)
    (x,) = seeded(tuple(result.outputs["shape"]))
    assert result.outputs["shape"][1] == 4
    assert result.outputs["sum"] == pytest.approx(float((x + x).astype(np.float64).sum()),
                                                  rel=1e-5)


def test_the_cpu_time_limit_ends_a_run_as_timeout(tvm_envs: dict[str, Environment],
                                                  settings: Settings) -> None:
    # The case lowers its own CPU limit to one second: the kernel's SIGXCPU, soon.
    script = ("import resource\n_, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
              "resource.setrlimit(resource.RLIMIT_CPU, (1, hard))\nwhile True:\n    pass\n")
    result = run_variant(parse_case({"script": script}), "script", tvm_envs[NEW_ENV],
                         LocalRuntime(settings))
    assert (result.status, result.error_type) == ("timeout", "Timeout")
    assert result.message is not None and result.message.startswith(
        "the run used more than its CPU time limit")


@pytest.fixture(scope="module")
def one_release_each(settings: Settings) -> list[Environment]:
    """An environment of each minor release, provisioned (real TVM)."""
    from worker.environments.provision import provision

    envs = [default_catalog().get(env_id) for env_id in ONE_RELEASE_EACH]
    for env in envs:
        provision(settings, env)
    return envs


def test_a_build_failure_fixed_in_0_26_on_each_minor_release(
        one_release_each: list[Environment], settings: Settings) -> None:
    data = json.loads((REPO / "tests/cases/relax-fusetir-decl-buffer-alias/case.json").read_text())
    case = parse_case(data)
    old, mid, new = (run_variant(case, "fused", env, LocalRuntime(settings))
                     for env in one_release_each)
    assert (old.status, old.stage, old.error_type) == ("error", "build", "InternalError")
    assert "occurred before" in (old.message or "")
    for fixed in (mid, new):
        assert (fixed.status, fixed.stage) == ("ok", "run"), fixed.log.stderr[-2000:]
    assert isinstance(mid.outputs, dict) and isinstance(new.outputs, dict)
    assert mid.outputs["sha256"] == new.outputs["sha256"]
    assert mid.outputs["sha256"].startswith("dae38ed69655")  # as measured in its NOTES.md
