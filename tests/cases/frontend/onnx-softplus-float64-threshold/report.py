import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

node = helper.make_node("Softplus", ["X"], ["Y"])
graph = helper.make_graph(
    [node],
    "softplus_f64",
    [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [3])],
    [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [3])],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])

x = np.array([20.0, 20.1, 25.0], dtype=np.float64)
ref = ReferenceEvaluator(model).run(None, {"X": x})[0]

mod = from_onnx(model)
ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
got = vm["main"](tvm.runtime.tensor(x)).numpy()

for xi, r, g in zip(x, ref, got):
    print(f"x={xi!r}: onnx.reference={r!r} TVM={g!r} err={abs(r - g):.3g}")
np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0)
