"""The standalone reproducer in each result runs, as written, in the environment's own Python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.command_line import run_json
from tests.conftest import MISSING_FUNCTION, case_path
from tests.harness.standalone import run_standalone
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings

pytestmark = pytest.mark.tvm


def test_the_founding_reproducer_fails_the_same_way(settings: Settings, tmp_path: Path,
                                                    tvm_envs: dict[str, Environment],
                                                    founding_local_runs: list[dict[str, Any]]) -> None:
    for run in founding_local_runs:
        output = run_standalone(settings, tvm_envs[run["environment"]], run["reproducer"], tmp_path)
        if run["variant"] == "fusetir-once":
            assert f"Cannot find ffi::Function {MISSING_FUNCTION}" in output, output[-2000:]
            assert "tvm.relax.transform.AllocateWorkspace()" in run["reproducer"]
        else:
            assert output.strip().endswith("built; the VM was created"), output[-2000:]


def test_an_entry_reproducer_computes_the_same_output(settings: Settings, tmp_path: Path,
                                                     tvm_envs: dict[str, Environment]) -> None:
    case = json.loads(case_path("cuda-matmul-relu/case.json").read_text())
    case.update(target="llvm")
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    for run in run_json(path, settings.home):
        script = run["reproducer"] + (
            "print('SUM', float(np.asarray(output.numpy(), dtype=np.float64).sum()))\n")
        output = run_standalone(settings, tvm_envs[run["environment"]], script, tmp_path)
        total = float(output.rsplit("SUM ", 1)[1].split()[0])
        assert total == pytest.approx(run["outputs"]["sum"], rel=1e-9), output[-2000:]
