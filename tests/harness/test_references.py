"""A script's imported model run by its own framework too (images/harness/references.py): real
reports of the frontend corpus through the harness, with TVM, torch, onnx and onnxruntime."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CASES
from tests.harness.direct import run_harness
from tvmrepro.outputs import OutputComparison, compare_outputs
from tvmrepro.results import Result

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(900)]
CORPUS = CASES / "frontend"

# A one-node ONNX graph whose result TVM gets wrong (measured on 0.27.0.post1): Sign of NaN is
# 0 where ONNX (and onnxruntime) say NaN. onnx 1.23 writes IR version 14 by default, newer
# than onnxruntime 1.31 takes. The script ends with an assert of its own after the VM call.
SIGN = """
import numpy as np
import tvm
from onnx import TensorProto, helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

graph = helper.make_graph([helper.make_node("Sign", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
vm = relax.VirtualMachine(relax.build(from_onnx(model), target="llvm"), tvm.cpu())
got = vm["main"](tvm.runtime.tensor(np.array([np.nan, -0.0, 2.0], dtype="float32"))).numpy()
print("TVM:", got)
assert np.isnan(got[0]), "Sign(NaN) must be NaN"
"""


def corpus(name: str) -> dict[str, str]:
    """A report of the frontend corpus as a script case."""
    return {"script": (CORPUS / name / "report.py").read_text(), "title": name}


def judged(result: Result) -> OutputComparison:
    """TVM's outputs against the framework's, as the matrix judges them."""
    assert result.reference_outputs is not None, (result.reference_error, result.log.stderr[-3000:])
    found = compare_outputs(result.outputs, result.reference_outputs)
    assert found is not None
    return found


def test_an_onnx_report_is_checked_against_onnxruntime(frontend_python: Path,
                                                       tmp_path: Path) -> None:
    result, _ = run_harness(frontend_python, corpus("onnx-asinh-huge-input"), tmp_path)
    assert result.status == "ok", result.log.stderr[-3000:]
    assert result.reference_kind == "onnxruntime 1.31.1" and result.reference_error is None
    assert result.reference_note is None  # the report sets IR version 10 itself
    assert result.outputs["shape"] == [3] and result.outputs["dtype"] == "float32"
    # Fixed long before 0.27: finite values, within float32's tolerance of onnxruntime's.
    assert judged(result).outputs in ("same", "noise")
    assert all(abs(v) < 100 for v in result.outputs["sample"])


def test_a_torch_report_is_checked_against_eager_torch(frontend_python: Path,
                                                       tmp_path: Path) -> None:
    result, _ = run_harness(frontend_python, corpus("export-mm-default"), tmp_path)
    assert result.status == "ok", result.log.stderr[-3000:]
    assert result.reference_kind == "torch 2.13.0+cpu eager", result.reference_error
    # TVM returns a one-tensor tuple, eager torch the tensor: the leaves are compared.
    assert isinstance(result.outputs, list) and result.outputs[0]["shape"] == [2, 4]
    assert judged(result).outputs in ("same", "noise")


@pytest.fixture(scope="module")
def sign_run(frontend_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Result:
    """The Sign graph, its frontend module imported by the script itself (no flavour)."""
    result, _ = run_harness(frontend_python, {"script": SIGN}, tmp_path_factory.mktemp("sign"),
                            frontends=False)
    return result


def test_a_wrong_result_differs_from_onnxruntime(sign_run: Result) -> None:
    # The script's own assert failed after the VM call: its status, and the reference anyway.
    assert (sign_run.status, sign_run.stage, sign_run.error_type) == \
        ("error", "run", "AssertionError"), sign_run.log.stderr[-3000:]
    assert sign_run.outputs["sample"][0] == 0.0 and sign_run.reference_outputs["sample"][0] == "nan"
    found = judged(sign_run)
    assert (found.outputs, found.reason, found.mismatches) == ("differs", "non-finite", 1)


def test_an_ir_version_onnxruntime_refuses_is_lowered_on_a_copy(sign_run: Result) -> None:
    assert sign_run.reference_kind == "onnxruntime 1.31.1"
    assert sign_run.reference_note is not None
    assert "IR version 14" in sign_run.reference_note and "IR version 13" in sign_run.reference_note


def test_a_reference_past_the_time_limit_is_not_run_and_the_status_stands(
        frontend_python: Path, tmp_path: Path) -> None:
    late = SIGN.replace('assert np.isnan(got[0]), "Sign(NaN) must be NaN"',
                        "import time\ntime.sleep(2)")
    result, _ = run_harness(frontend_python, {"script": late, "timeout_s": 3}, tmp_path)
    assert result.status == "ok", result.log.stderr[-3000:]
    assert result.outputs is not None and result.reference_outputs is None
    assert result.reference_error == "TimeoutError: not run: the run's time limit is near"


def test_a_reference_the_framework_cannot_run_is_said_and_the_status_stands(
        frontend_python: Path, tmp_path: Path) -> None:
    # onnxruntime 1.31 has no float64 Softplus; 0.27.0.post1 passes the report's own check.
    result, _ = run_harness(frontend_python, corpus("onnx-softplus-float64-threshold"), tmp_path)
    assert result.status == "ok", result.log.stderr[-3000:]
    assert result.outputs["dtype"] == "float64" and result.reference_outputs is None
    assert result.reference_kind == "onnxruntime 1.31.1"
    assert (result.reference_error or "").startswith("NotImplemented: ")
    assert "Softplus(22)" in (result.reference_error or "")


def test_a_script_that_imports_no_model_has_no_reference(frontend_python: Path,
                                                         tmp_path: Path) -> None:
    script = ("import sys, numpy as np, tvm\nfrom tvm import relax\n"
              "from tvm.script import relax as R\n"
              "@R.function\ndef main(x: R.Tensor((2,), 'float32')):\n    return R.add(x, x)\n"
              "vm = relax.VirtualMachine(relax.build(tvm.IRModule({'main': main}), 'llvm'), "
              "tvm.cpu())\nvm['main'](tvm.runtime.tensor(np.ones(2, 'float32')))\n"
              "print(sorted({'onnx', 'onnxruntime', 'tvm.relax.frontend.onnx'} & set(sys.modules)))\n")
    result, _ = run_harness(frontend_python, {"script": script}, tmp_path, frontends=False)
    assert result.status == "ok", result.log.stderr[-3000:]
    assert (result.outputs, result.reference_outputs, result.reference_kind,
            result.reference_error) == (None, None, None, None)
    assert result.log.stdout == "[]\n"  # the hooks imported no frontend, no framework
