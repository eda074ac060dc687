import numpy as np
from onnx import TensorProto, helper
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

# A hand-written ScatterND model whose index lies far outside the data's first axis.
node = helper.make_node("ScatterND", ["data", "indices", "updates"], ["y"])
graph = helper.make_graph(
    [node],
    "scatternd_oob",
    [
        helper.make_tensor_value_info("data", TensorProto.FLOAT, [4, 4]),
        helper.make_tensor_value_info("indices", TensorProto.INT64, [1, 1]),
        helper.make_tensor_value_info("updates", TensorProto.FLOAT, [1, 4]),
    ],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

mod = from_onnx(model)
ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())

data = np.zeros((4, 4), dtype=np.float32)
indices = np.array([[1 << 40]], dtype=np.int64)
updates = np.ones((1, 4), dtype=np.float32)
out = vm["main"](tvm.runtime.tensor(data), tvm.runtime.tensor(indices), tvm.runtime.tensor(updates))
print("returned without an error:", out.numpy())
