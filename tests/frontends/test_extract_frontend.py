"""Extraction of frontend scripts (docs/narrowing.md#frontend-scripts): real reports whose
failure is in a pass or the code generation, extracted in their frontend flavour to a
module-mode case that gives the script's signature in the plain environment, where neither
torch nor onnx is installed.

- apache/tvm#20178 (tests/cases/tvm-20178, ONNX, layer `pass:FuseTIR` on 0.26.0): FuseTIR
  inside `relax.get_default_pipeline(llvm)`, given to `tvm.compile`;
- apache/tvm#17890 (tests/cases/tvm-17890, PyTorch, layer `codegen` on 0.25.0.post1): the VM's
  code generation meets `relax.nn.conv2d_transpose`.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from tests.conftest import CASES
from tvmrepro.cases import load_case_file
from tvmrepro.environments import Environment
from tvmrepro.frontends import needs_frontends
from tvmrepro.jobs.narrow.logic import EXTRACTED_VARIANT
from tvmrepro.outputs import compare_outputs
from tvmrepro.results import Result
from worker.narrowing.extraction import extract_recorded, record_script
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

# report -> (index of its release in the default set, the importer, the files the case carries)
REPORTS = {
    "tvm-20178": (1, "from_onnx", ["input_0.npy", "reference_0.npy"]),
    "tvm-17890": (0, "from_exported_program", []),
}


def signature_of(result: Result) -> tuple[object, ...]:
    """What must be the same: status, stage, error kind and message, signature."""
    return (result.status, result.stage, result.error_type, result.message, result.signature)


@pytest.fixture(scope="module")
def extracted(frontend_runtime: LocalRuntime, default_envs: list[Environment]
              ) -> dict[str, tuple[Result, object, Result]]:
    """Each report: the script's run (frontend flavour), the extraction, the case's own run."""
    found = {}
    for name, (index, _, _) in REPORTS.items():
        env = default_envs[index]
        script = load_case_file(CASES / name / "report.py")
        recorded = record_script(script, env, frontend_runtime)
        answer = extract_recorded(script, env, frontend_runtime, recorded)
        again = run_variant(answer.case, EXTRACTED_VARIANT, env, frontend_runtime)
        found[name] = (recorded.result, answer, again)
    return found


@pytest.mark.parametrize("name", REPORTS)
def test_the_case_gives_the_scripts_signature_without_a_frontend(
        name: str, extracted: dict[str, tuple[Result, object, Result]],
        default_envs: list[Environment]) -> None:
    script, answer, again = extracted[name]
    env = default_envs[REPORTS[name][0]]
    assert script.frontends is not None and "torch" in script.frontends  # the flavour ran it
    assert script.status == "error" and script.stage == "build", script.message
    assert answer.reproduces, answer.model_dump(mode="json")  # type: ignore[attr-defined]
    case = answer.case  # type: ignore[attr-defined]
    assert not needs_frontends(case)  # TVMScript (or save_json text) only
    text = (case.source or "") + (case.module_json or "")
    assert "torch" not in text and "onnx" not in text
    # The case's own run, in the plain environment: no torch, no onnx there.
    assert (again.environment, again.frontends) == (env.id, None)
    assert signature_of(again) == signature_of(script), (again.message, script.message)


def test_the_onnx_case_carries_the_scripts_inputs_and_reference(
        extracted: dict[str, tuple[Result, object, Result]], frontend_runtime: LocalRuntime,
        default_envs: list[Environment]) -> None:
    _, answer, _ = extracted["tvm-20178"]
    case = answer.case  # type: ignore[attr-defined]
    assert [f.name for f in case.files] == REPORTS["tvm-20178"][2]
    assert (case.entry, case.inputs.files) == ("main", ["input_0.npy"])
    assert case.relax_pipeline == "target_default"  # relax.get_default_pipeline(target)
    given = np.load(io.BytesIO(case.files[0].data()))
    # The script's own data: default_rng(0) normal (2, 8) float32, times 10.
    expected = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32) * 10
    assert given.dtype == np.float32 and np.array_equal(given, expected)
    # On 0.27.0.post1 (which fixed it) the case builds, runs on those inputs and computes
    # what ONNX Runtime computed, without ONNX Runtime.
    fixed = run_variant(case, EXTRACTED_VARIANT, default_envs[2], frontend_runtime)
    assert (fixed.status, fixed.frontends) == ("ok", None), fixed.message
    comparison = compare_outputs(fixed.outputs, fixed.reference_outputs)
    assert comparison is not None and comparison.outputs == "same", comparison


def test_the_torch_case_starts_at_the_imported_module(
        extracted: dict[str, tuple[Result, object, Result]]) -> None:
    """from_exported_program runs BindParams itself: that pass is the importer's, not a step
    of the script's, so the case starts at the module the importer returned (no passes)."""
    _, answer, _ = extracted["tvm-17890"]
    case = answer.case  # type: ignore[attr-defined]
    assert [p.name for p in case.variants[0].passes] == []
    assert case.files == []  # the unoptimised path fails in codegen too: no VM call to take
    assert any("no VM call" in note for note in answer.notes)  # type: ignore[attr-defined]
