import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def make_model(node, inputs, output, initializer=()):
    graph = helper.make_graph(
        [node], node.op_type.lower(), inputs, [output], initializer=list(initializer)
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def run_tvm(model, feeds):
    mod = from_onnx(model)
    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()]).numpy()


def check(title, model, feeds):
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    got = run_tvm(model, feeds)
    print(title)
    print("  expected:", expected.tolist())
    print("  TVM:     ", got.tolist())
    return np.allclose(got, expected)


data = np.arange(12, dtype=np.float32).reshape(3, 4)
f = TensorProto.FLOAT
i64 = TensorProto.INT64
vi = helper.make_tensor_value_info

cases = [
    (
        "GatherElements axis=1, all indices -1",
        make_model(
            helper.make_node("GatherElements", ["data", "indices"], ["y"], axis=1),
            [vi("data", f, [3, 4]), vi("indices", i64, [3, 4])],
            vi("y", f, [3, 4]),
        ),
        {"data": data, "indices": np.full((3, 4), -1, dtype=np.int64)},
    ),
    (
        "GatherND indices [[-1,-1],[0,-2]]",
        make_model(
            helper.make_node("GatherND", ["data", "indices"], ["y"]),
            [vi("data", f, [3, 4]), vi("indices", i64, [2, 2])],
            vi("y", f, [2]),
        ),
        {"data": data, "indices": np.array([[-1, -1], [0, -2]], dtype=np.int64)},
    ),
    (
        "ScatterND indices [[-1],[0]]",
        make_model(
            helper.make_node("ScatterND", ["data", "indices", "updates"], ["y"]),
            [vi("data", f, [3, 4]), vi("indices", i64, [2, 1]), vi("updates", f, [2, 4])],
            vi("y", f, [3, 4]),
        ),
        {
            "data": np.zeros((3, 4), dtype=np.float32),
            "indices": np.array([[-1], [0]], dtype=np.int64),
            "updates": np.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.float32),
        },
    ),
    (
        "OneHot depth=5, indices [0,2,4,-1]",
        make_model(
            helper.make_node("OneHot", ["indices", "depth", "values"], ["y"], axis=-1),
            [vi("indices", i64, [4])],
            vi("y", f, [4, 5]),
            [
                helper.make_tensor("depth", i64, [], [5]),
                helper.make_tensor("values", f, [2], [0, 1]),
            ],
        ),
        {"indices": np.array([0, 2, 4, -1], dtype=np.int64)},
    ),
]

failed = [title for title, model, feeds in cases if not check(title, model, feeds)]
assert not failed, f"mismatch vs onnx.reference: {failed}"
