"""The judgement of a run's outputs against its reference, on summaries (no TVM, no frontends):
per-dtype tolerances, noise against differs, NaN and infinities, and the matrix's reference."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from images import IMAGES_DIR
from tvmrepro.jobs.matrix import build_matrix
from tvmrepro.lifecycle import RunState
from tvmrepro.outputs import compare_outputs
from tvmrepro.store.rows import JobRow, RunRow

sys.path.insert(0, str(IMAGES_DIR))
from harness.references import summary_of  # noqa: E402


def leaf(sample: list[Any], dtype: str = "float32", sha: str | None = "x") -> dict[str, Any]:
    return {"shape": [len(sample)], "dtype": dtype, "sha256": sha, "sample": sample}


@pytest.mark.parametrize(("dtype", "error", "verdict"), [
    ("float16", 5e-3, "noise"), ("float32", 5e-3, "differs"), ("float32", 5e-6, "noise"),
    ("float64", 5e-8, "noise"), ("float64", 5e-6, "differs"), ("int64", 1, "differs"),
])
def test_each_dtype_has_its_tolerance(dtype: str, error: float, verdict: str) -> None:
    found = compare_outputs(leaf([1.0 + error], dtype, "a"), leaf([1.0], dtype, "b"))
    assert found is not None and found.outputs == verdict
    assert found.max_abs_error == pytest.approx(error)


@pytest.mark.parametrize(("got", "want", "verdict", "reason"), [
    (["inf", "-inf"], ["inf", "-inf"], "noise", ""),  # equal values, other bytes elsewhere
    (["inf"], ["-inf"], "differs", "non-finite"),  # an infinity must match its sign
    (["inf"], [3e38], "differs", "non-finite"),  # however large the finite value
    (["nan"], ["inf"], "differs", "non-finite"),
    ([0.0], ["nan"], "differs", "non-finite"),
])
def test_nan_and_infinities(got: list[Any], want: list[Any], verdict: str, reason: str) -> None:
    found = compare_outputs(leaf(got, sha="a"), leaf(want, sha="b"))
    assert found is not None and (found.outputs, found.reason) == (verdict, reason)


def test_differs_counts_the_mismatches_and_sizes_the_finite_ones() -> None:
    found = compare_outputs(leaf([1.0, "nan", 5.0, 2.0], sha="a"), leaf([1.0, 2.0, 5.5, 0.0], sha="b"))
    assert found is not None and (found.outputs, found.reason) == ("differs", "values")
    assert found.mismatches == 3 and found.max_abs_error == pytest.approx(2.0)
    assert found.max_rel_error == pytest.approx(0.5 / 5.5)  # no relative error against a zero


def test_bitwise_equal_is_same_and_equal_samples_without_a_hash_too() -> None:
    x = summary_of(np.array([1.5, -0.0, np.nan], dtype=np.float32))
    assert compare_outputs(x, dict(x)).outputs == "same"  # type: ignore[union-attr]
    assert compare_outputs(leaf([1.0], sha=None), leaf([1.0], sha="b")).outputs == "same"  # type: ignore[union-attr]
    # One tensor against a one-element tuple (torch eager and TVM's torch import): the leaves.
    assert compare_outputs([x], x).outputs == "same"  # type: ignore[union-attr]


# Measured on tvm-0.27.0.post1 and onnxruntime 1.31.1 (one-node ONNX graphs, float32): TVM's
# Sign of NaN is 0 where onnxruntime's is NaN; TVM's Softplus of -100 flushes to 0 where
# onnxruntime keeps the denormal 3.8e-44.
SIGN_X = [np.nan, -0.0, 2.0]
SIGN_TVM, SIGN_ORT = [0.0, 0.0, 1.0], [np.nan, 0.0, 1.0]
SOFTPLUS_TVM, SOFTPLUS_ORT = [100.0, 90.0, 0.0], [100.0, 90.0, 3.8e-44]


def f32(values: list[float]) -> Any:
    return summary_of(np.array(values, dtype=np.float32))


def test_a_wrong_result_of_a_real_pair_differs_and_float_noise_is_noise() -> None:
    sign = compare_outputs(f32(SIGN_TVM), f32(SIGN_ORT))
    assert sign is not None and (sign.outputs, sign.reason, sign.mismatches) == \
        ("differs", "non-finite", 1)
    softplus = compare_outputs(f32(SOFTPLUS_TVM), f32(SOFTPLUS_ORT))
    assert softplus is not None and softplus.outputs == "noise"
    assert 0 < (softplus.max_abs_error or 0) < 1e-40


def _script_run(env: str, outputs: Any, reference: Any, kind: str | None) -> RunRow:
    result = {"status": "ok", "stage": "run", "outputs": outputs,
              "reference_outputs": reference, "reference_kind": kind}
    return RunRow(id=env, job_id="j", ordinal=0, variant="script", environment=env,
                  state=RunState.DONE, cache_key="k", result_id=env, timeout_s=60,
                  created_at=0.0, result=result)


def _cell(outputs: Any, reference: Any, kind: str | None) -> Any:
    """The matrix cell of a job of one script run."""
    job = JobRow(id="j", kind="run", case={}, variants=["script"], environments=["e"],
                 created_at=0.0, runs=[_script_run("e", outputs, reference, kind)])
    return build_matrix(job).cells[0][0]


def test_the_matrix_flags_a_script_against_its_framework() -> None:
    sign = _cell(f32(SIGN_TVM), f32(SIGN_ORT), "onnxruntime 1.31.1")
    assert sign.outputs == "differs" and sign.output_error is not None
    assert sign.output_error.against.variant == "onnxruntime 1.31.1 reference"
    assert (sign.output_error.reason, sign.output_error.mismatches) == ("non-finite", 1)
    softplus = _cell(f32(SOFTPLUS_TVM), f32(SOFTPLUS_ORT), "onnxruntime 1.31.1")
    assert softplus.outputs == "noise" and softplus.output_error is not None
    assert softplus.output_error.max_abs_error == pytest.approx(3.8e-44, rel=0.1)
    same = _cell(f32([2.0]), f32([2.0]), "torch 2.13.0+cpu eager")
    assert same.outputs == "same" and same.output_error is None
    numpy = _cell(f32([1.0]), f32([1.0 + 1e-4]), None)  # the case's own NumPy expression
    assert numpy.output_error is not None
    assert numpy.output_error.against.variant == "numpy reference"
