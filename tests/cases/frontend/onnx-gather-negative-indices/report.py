import numpy as np
import onnx
from onnx import helper, TensorProto
import onnxruntime as ort
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


x_info = helper.make_tensor_value_info("X", TensorProto.FLOAT, [5])
i_info = helper.make_tensor_value_info("I", TensorProto.INT64, [3])
y_info = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3])

node = helper.make_node("Gather", ["X", "I"], ["Y"], axis=0)
graph = helper.make_graph([node], "g", [x_info, i_info], [y_info])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 10

X = np.array([1, 2, 3, 4, 5], dtype=np.float32)
I = np.array([-1, -3, 0], dtype=np.int64)

sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
ort_out = sess.run(None, {"X": X, "I": I})[0]

mod = from_onnx(model)
mod = relax.transform.LegalizeOps()(mod)
ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
tvm_out = vm["main"](tvm.runtime.tensor(X), tvm.runtime.tensor(I)).numpy()

print("ORT:", ort_out)
print("TVM:", tvm_out)
np.testing.assert_allclose(tvm_out, ort_out)
