import numpy as np
import onnx
from onnx import TensorProto, helper
import onnxruntime as ort
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def build_model():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 10, 10])
    rois = helper.make_tensor_value_info("R", TensorProto.FLOAT, [2, 4])
    batch = helper.make_tensor_value_info("B", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 1, 8, 8])

    node = helper.make_node(
        "RoiAlign",
        inputs=["X", "R", "B"],
        outputs=["Y"],
        coordinate_transformation_mode="half_pixel",
        mode="avg",
        output_height=8,
        output_width=8,
        sampling_ratio=2,
        spatial_scale=1.0,
    )

    graph = helper.make_graph([node], "roialign_half_pixel", [x, rois, batch], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=9)


model = build_model()
rng = np.random.default_rng(0)
x = rng.random((1, 1, 10, 10), dtype=np.float32)
rois = np.array([[0.0, 0.0, 9.0, 9.0], [1.5, 2.5, 7.5, 8.5]], dtype=np.float32)
batch = np.zeros(2, dtype=np.int64)

sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
ort_out = sess.run(None, {"X": x, "R": rois, "B": batch})[0]

mod = from_onnx(model, shape_dict={"X": list(x.shape), "R": list(rois.shape), "B": list(batch.shape)})
with tvm.transform.PassContext(opt_level=3):
    ex = tvm.compile(mod, target="llvm")

vm = relax.VirtualMachine(ex, tvm.cpu())
dev = tvm.cpu()
tvm_out = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(rois), tvm.runtime.tensor(batch)).numpy()

print("ORT[0,0,:]: ", ort_out[0, 0, 0])
print("TVM[0,0,:]: ", tvm_out[0, 0, 0])
max_abs = np.max(np.abs(tvm_out - ort_out))
print(f"max_abs={max_abs:.6e}  tol=1e-04")
np.testing.assert_allclose(tvm_out, ort_out, rtol=1e-4, atol=1e-4)
