import warnings

warnings.filterwarnings("ignore")

import numpy as np
import onnxruntime as ort
import tvm
from onnx import TensorProto, helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def build_model(op):
    node = helper.make_node(op, ["x"], ["y"])

    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    return model


def run(op, x):
    model = build_model(op)

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_out = sess.run(None, {"x": x})[0]

    mod = from_onnx(model)
    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    tvm_out = vm["main"](tvm.runtime.tensor(x)).numpy()

    print(op, " input:", x)
    print("  ORT:", ort_out)
    print("  TVM:", tvm_out)
    return ort_out, tvm_out


x = np.array([88.85, 89.0, 89.2, -88.95], dtype=np.float32)
results = [run(op, x) for op in ("Sinh", "Cosh")]
for ort_out, tvm_out in results:
    np.testing.assert_allclose(tvm_out, ort_out, rtol=1e-5)
