import warnings

warnings.filterwarnings("ignore")

import numpy as np
import onnxruntime as ort
import tvm
from onnx import TensorProto, helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


node = helper.make_node("Asinh", ["x"], ["y"])

graph = helper.make_graph(
    [node],
    "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
)

model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
model.ir_version = 10

x = np.array([3e22, 5e25, -8e23], dtype=np.float32)

sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
ort_out = sess.run(None, {"x": x})[0]

mod = from_onnx(model)
ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
tvm_out = vm["main"](tvm.runtime.tensor(x)).numpy()

print("input:", x)
print("ORT  :", ort_out)
print("TVM  :", tvm_out)
np.testing.assert_allclose(tvm_out, ort_out, rtol=1e-5)
