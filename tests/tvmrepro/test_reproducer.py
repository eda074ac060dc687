"""The script a report shows, made here from the case and the rewrites a run names, runs as
written in the environment's own Python: the founding case fails the same way, and an entry
call computes the run's very output."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import MISSING_FUNCTION, NEW_ENV, OLD_ENV, case_path
from tests.harness.standalone import run_standalone
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.reproducer import reproducer
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm


def made_here(case: dict[str, Any], env: Environment, variant: str,
              rewrites: list[str]) -> str:
    return reproducer(case, variant, env.release, env.target, rewrites)


def test_the_founding_script_fails_the_same_way(settings: Settings, tmp_path: Any,
                                                tvm_envs: dict[str, Environment],
                                                warm_runtime: LocalRuntime) -> None:
    case = json.loads(case_path("tvm-17357/case.json").read_text())
    for env_id in (OLD_ENV, NEW_ENV):
        env = tvm_envs[env_id]
        result = run_variant(parse_case(case), "fusetir-once", env, warm_runtime)
        assert result.status == "error" and MISSING_FUNCTION in (result.message or "")
        script = made_here(case, env, "fusetir-once", result.rewrites)
        output = run_standalone(settings, env, script, tmp_path)
        assert f"Cannot find ffi::Function {MISSING_FUNCTION}" in output, output[-2000:]


def test_an_entry_call_computes_the_runs_output(settings: Settings, tmp_path: Any,
                                                tvm_envs: dict[str, Environment],
                                                warm_runtime: LocalRuntime) -> None:
    case = json.loads(case_path("cuda-matmul-relu/case.json").read_text())
    case.update(target="llvm")
    env = tvm_envs[NEW_ENV]
    variant = case["variants"][0]["name"]
    result = run_variant(parse_case(case), variant, env, warm_runtime)
    assert result.status == "ok", result.log.stderr[-2000:]
    script = made_here(case, env, variant, result.rewrites) + (
        "print('SUM', float(np.asarray(output.numpy(), dtype=np.float64).sum()))\n")
    output = run_standalone(settings, env, script, tmp_path)
    total = float(output.rsplit("SUM ", 1)[1].split()[0])
    assert total == pytest.approx(result.outputs["sum"], rel=1e-9), output[-2000:]
