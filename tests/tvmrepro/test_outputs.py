"""Output comparison: by bytes, then by value within the dtype's tolerance; real outputs too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.command_line import run_json
from tests.conftest import NEW_ENV, OLD_ENV, case_path
from tvmrepro.environments import Environment
from tvmrepro.outputs import compare_outputs


def leaf(sample: list[Any], dtype: str = "float32", sha: str = "x") -> dict[str, Any]:
    return {"shape": [len(sample)], "dtype": dtype, "sha256": sha, "sample": sample}


def test_equal_bytes_are_the_same() -> None:
    same = compare_outputs([leaf([1.0], sha="a")], [leaf([2.0], sha="a")])
    assert same is not None and same.outputs == "same" and same.max_abs_error == 0.0


def test_float_noise_within_tolerance_is_noise_with_its_size() -> None:
    near = compare_outputs(leaf([1.0, 100.0], sha="a"), leaf([1.0 + 1e-6, 100.0], sha="b"))
    assert near is not None and near.outputs == "noise" and near.mismatches == 0
    assert near.max_abs_error == pytest.approx(1e-6)


@pytest.mark.parametrize(("a", "b", "reason"), [
    (leaf([1.0, 2.0], sha="a"), leaf([1.0, 2.5], sha="b"), "values"),
    (leaf([1], "int32", "a"), leaf([2], "int32", "b"), "values"),
    (leaf([1.0], sha="a"), leaf([1.0, 1.0], sha="b"), "shape"),
    (leaf([1.0], "float16", "a"), leaf([1.0], "float32", "b"), "dtype"),
    ([leaf([1.0])], [leaf([1.0]), leaf([1.0])], "structure"),
    (leaf(["nan"], sha="a"), leaf([0.0], sha="b"), "non-finite"),
])
def test_differences_are_named(a: Any, b: Any, reason: str) -> None:
    found = compare_outputs(a, b)
    assert found is not None and (found.outputs, found.reason) == ("differs", reason)


def test_nan_equals_nan_and_no_outputs_is_no_answer() -> None:
    found = compare_outputs(leaf(["nan", 1.0], sha="a"), leaf(["nan", 1.0], sha="b"))
    assert found is not None and found.outputs == "noise" and found.max_abs_error == 0.0
    assert compare_outputs(None, leaf([1.0])) is None


@pytest.mark.tvm
def test_real_outputs_of_two_releases_agree(tmp_path: Path, test_home: Path,
                                            tvm_envs: dict[str, Environment]) -> None:
    case = json.loads(case_path("cuda-matmul-relu/case.json").read_text())
    case.update(target="llvm", title="matmul + relu on the CPU")
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    runs = {r["environment"]: r for r in run_json(path, test_home)}
    old, new = runs[OLD_ENV], runs[NEW_ENV]
    assert old["status"] == new["status"] == "ok"
    assert len(old["outputs"]["sample"]) == 4096  # 65536 elements, every 16th
    same = compare_outputs(new["outputs"], old["outputs"])
    assert same is not None and same.outputs in ("same", "noise")
    broken = json.loads(json.dumps(new["outputs"]))
    broken["sha256"], broken["sample"][7] = "edited", broken["sample"][7] + 1.0
    differs = compare_outputs(broken, old["outputs"])
    assert differs is not None and differs.outputs == "differs"
    assert differs.max_abs_error == pytest.approx(1.0, rel=1e-3)


def test_a_none_output_holds_nothing_and_other_values_compare_as_written() -> None:
    # The VM returns `(x + 1, None)`; the framework's reference leaves the None out.
    tvm_said = [leaf([1.0], sha="a"), {"value": "None"}]
    assert (compare_outputs(tvm_said, tvm_said) or pytest.fail()).outputs == "same"
    assert (compare_outputs(tvm_said, [leaf([1.0], sha="a")]) or pytest.fail()).outputs == "same"
    shape = {"value": "R.shape([2, 3])"}
    assert (compare_outputs([shape], [shape]) or pytest.fail()).outputs == "same"
    other = compare_outputs([shape], [{"value": "R.shape([3, 2])"}])
    assert other is not None and (other.outputs, other.reason) == ("differs", "values")
