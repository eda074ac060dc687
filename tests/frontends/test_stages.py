"""Where a frontend report fails: the framework making its model (`model`, incompatible: the
pinned framework's refusal, not the report's bug), TVM's importer (`frontend`), or later; and
which flavour a case runs in (a plain TVMScript case never carries torch)."""

from __future__ import annotations

import pytest

from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.frontends import needs_frontends
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

# onnx 1.23 writes IR version 14 unless told otherwise; onnxruntime 1.31 refuses it. Reports
# written with onnx 1.17 got IR 10 and compared with onnxruntime without a word.
ONNXRUNTIME_REFUSES_IR = """
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"])], "relu",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
print(session.run(None, {"x": np.ones(2, np.float32)}))
"""
# torch 2.13's torch.export refuses a tensor's `.data` inside forward(), which older torch
# only warned about ("We found a fake tensor in the exported program constant's list").
EXPORT_REFUSES_DATA = """
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(2))

    def forward(self, x):
        return x * self.weight.data

torch.export.export(Model(), (torch.ones(2),))
"""
# TVM's importer raising: a graph whose node names an operator no converter knows.
IMPORTER_RAISES = """
import onnx
from onnx import TensorProto, helper
from tvm.relax.frontend.onnx import from_onnx

graph = helper.make_graph(
    [helper.make_node("NoSuchOperator", ["x"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
"""


@pytest.fixture(scope="module")
def newest(default_envs: list[Environment]) -> Environment:
    """The newest default release."""
    return default_envs[-1]


def test_onnxruntime_refusing_the_model_is_the_frameworks_answer(
        frontend_runtime: LocalRuntime, newest: Environment) -> None:
    result = run_variant(parse_case({"script": ONNXRUNTIME_REFUSES_IR}), "script", newest,
                         frontend_runtime)
    assert (result.status, result.stage) == ("incompatible", "model"), result.log.stderr[-2000:]
    assert "does not build with the pinned" in (result.message or "")
    assert "onnxruntime 1.31.1" in (result.message or "")
    assert "IR version" in (result.message or "")


def test_torch_export_refusing_the_model_is_the_frameworks_answer(
        frontend_runtime: LocalRuntime, newest: Environment) -> None:
    result = run_variant(parse_case({"script": EXPORT_REFUSES_DATA}), "script", newest,
                         frontend_runtime)
    assert (result.status, result.stage) == ("incompatible", "model"), result.log.stderr[-2000:]
    assert "torch 2.13.0" in (result.message or "")


def test_an_importer_failure_is_the_frontend_stage(frontend_runtime: LocalRuntime,
                                                   newest: Environment) -> None:
    result = run_variant(parse_case({"script": IMPORTER_RAISES}), "script", newest,
                         frontend_runtime)
    assert (result.status, result.stage) == ("error", "frontend"), result.log.stderr[-2000:]
    assert "NoSuchOperator" in (result.message or "") + result.log.stderr


def test_a_plain_case_runs_without_the_frontends(frontend_runtime: LocalRuntime,
                                                 newest: Environment) -> None:
    script = "import tvm, sys\nprint('torch' in sys.modules)\n"
    case = parse_case({"script": script})
    assert not needs_frontends(case)
    result = run_variant(case, "script", newest, frontend_runtime)
    assert result.status == "ok" and result.frontends is None
    assert result.log.stdout.strip() == "False"  # tvm-ffi found no torch to import
