#!/usr/bin/env python3
"""Reproduce the FuseTIR/RenewDefs Flatten-Slice-Cast failure."""

import numpy as np
import onnx
import onnxruntime as ort
import tvm
from onnx import TensorProto, helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def main() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])
    out = helper.make_tensor_value_info("out", TensorProto.INT32, [1, 4])
    starts = helper.make_tensor("starts", TensorProto.INT64, [1], [1])
    ends = helper.make_tensor("ends", TensorProto.INT64, [1], [5])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph(
        [
            helper.make_node("Flatten", ["x"], ["flat"], axis=0),
            helper.make_node("Slice", ["flat", "starts", "ends", "axes"], ["sliced"]),
            helper.make_node("Cast", ["sliced"], ["out"], to=TensorProto.INT32),
        ],
        "flatten_slice_cast",
        [x],
        [out],
        initializer=[starts, ends, axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    onnx.checker.check_model(model)

    data = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32) * 10
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": data})[0]

    mod = from_onnx(model)
    target = tvm.target.Target("llvm")
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(data)).numpy()
    np.testing.assert_array_equal(got, expected)
    print("TVM matches ONNX Runtime:", got.tolist())


if __name__ == "__main__":
    main()
