import numpy as np
import onnx
from onnx import TensorProto, helper
import onnxruntime as ort
import tvm
from tvm import relay
from tvm.contrib import graph_executor


def build_model():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 3, 3])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)

    scales = helper.make_tensor(
        "scales", TensorProto.FLOAT, [4], [1.0, 1.0, 1.5, 1.5]
    )

    resize = helper.make_node(
        "Resize",
        inputs=["X", "", "scales"],
        outputs=["Y"],
        mode="nearest",
        coordinate_transformation_mode="half_pixel",
        nearest_mode="round_prefer_floor",
    )

    graph = helper.make_graph([resize], "resize_nearest", [x], [y], initializer=[scales])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)


model = build_model()
x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)

sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
ort_out = sess.run(None, {"X": x})[0]
print("ORT output [0,0]:")
print(ort_out[0, 0])

mod, params = relay.frontend.from_onnx(model, shape={"X": x.shape})
with tvm.transform.PassContext(opt_level=3):
    lib = relay.build(mod, target="llvm", params=params)

m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
m.set_input("X", x)
m.run()
tvm_out = m.get_output(0).numpy()
print("TVM output [0,0]:")
print(tvm_out[0, 0])

max_abs = np.max(np.abs(tvm_out - ort_out))
print(f"max_abs={max_abs:.6e}")
np.testing.assert_allclose(tvm_out, ort_out, rtol=1e-5, atol=1e-5)
