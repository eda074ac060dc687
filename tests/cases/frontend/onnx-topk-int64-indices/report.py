import onnx
from onnx import TensorProto, helper
from tvm.relax.frontend.onnx import from_onnx

k = helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.INT64, [1], [4]))
divisor = helper.make_node(
    "Constant", [], ["divisor"], value=helper.make_tensor("divisor", TensorProto.INT64, [1], [2])
)
topk = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1)
div = helper.make_node("Div", ["indices", "divisor"], ["out"])

graph = helper.make_graph(
    [k, divisor, topk, div],
    "topk_div",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
    [
        helper.make_tensor_value_info("values", TensorProto.FLOAT, [2, 4]),
        helper.make_tensor_value_info("out", TensorProto.INT64, [2, 4]),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
onnx.checker.check_model(model)

mod = from_onnx(model)
print("import succeeded")
