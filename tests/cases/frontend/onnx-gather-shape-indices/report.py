#!/usr/bin/env python3
"""Reproduce the Relax ONNX ShapeType/Gather import failure."""

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from tvm.relax.frontend.onnx import from_onnx


def main() -> None:
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [4])
    shape_source = helper.make_tensor_value_info("shape_source", TensorProto.FLOAT, [2, 3])
    output = helper.make_tensor_value_info("output", TensorProto.FLOAT, [2])

    shape = helper.make_node("Shape", ["shape_source"], ["indices"])
    gather = helper.make_node("Gather", ["data", "indices"], ["output"], axis=0)

    graph = helper.make_graph([shape, gather], "shape_gather", [data, shape_source], [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10

    onnx.checker.check_model(model)
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    print("onnx.checker and ONNX Runtime accept the model")

    from_onnx(model)
    print("from_onnx succeeded")


if __name__ == "__main__":
    main()
