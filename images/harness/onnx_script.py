"""An ONNX model as a short Python script of `onnx.helper` calls that builds it and imports it.

What a reduced importer failure is handed back as: a script case (its source runs as any
report does, in the frontend flavour) with the nodes (`make_node`, attributes as keywords),
the graph's inputs and outputs (`make_tensor_value_info`), its initializers
(`numpy_helper.from_array` of a literal array), its opsets and IR version, and the call
`from_onnx(model)`. Graph-valued attributes (If, Loop bodies) are not written: ValueError.
"""

from __future__ import annotations

from typing import Any

HEADER = """import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tvm.relax.frontend.onnx import from_onnx
"""


def _array(tensor: Any) -> str:
    """A tensor as `numpy_helper.from_array(np.array(...), name)`."""
    from onnx import numpy_helper

    array = numpy_helper.to_array(tensor)
    return (f"numpy_helper.from_array(np.array({array.tolist()!r}, dtype=np.{array.dtype})"
            f".reshape({list(array.shape)!r}), {tensor.name!r})")


def _attribute(attr: Any) -> str:
    from onnx import AttributeProto, helper

    if attr.type == AttributeProto.TENSOR:
        return _array(attr.t)
    if attr.type == AttributeProto.TENSORS:
        return "[" + ", ".join(_array(t) for t in attr.tensors) + "]"
    if attr.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
        raise ValueError(f"attribute {attr.name}: a graph")
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, list):
        value = [v.decode() if isinstance(v, bytes) else v for v in value]
    return repr(value)


def _node(node: Any) -> str:
    parts = [repr(node.op_type), repr(list(node.input)), repr(list(node.output))]
    if node.domain:
        parts.append(f"domain={node.domain!r}")
    parts += [f"{a.name}={_attribute(a)}" for a in node.attribute]
    return f"    helper.make_node({', '.join(parts)}),"


def _value_info(info: Any) -> str:
    from onnx import TensorProto

    tensor = info.type.tensor_type
    if not info.type.HasField("tensor_type"):
        raise ValueError(f"value {info.name}: not a tensor")
    dtype = TensorProto.DataType.Name(tensor.elem_type)
    shape = ([d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
              for d in tensor.shape.dim] if tensor.HasField("shape") else None)
    return f"    helper.make_tensor_value_info({info.name!r}, TensorProto.{dtype}, {shape!r}),"


def helper_script(model: Any) -> str:
    """The script that builds `model` and calls `from_onnx` on it."""
    graph = model.graph
    opsets = ", ".join(f"helper.make_opsetid({o.domain!r}, {o.version})"
                       for o in model.opset_import)
    lines = [HEADER, "nodes = [", *map(_node, graph.node), "]",
             "inputs = [", *map(_value_info, graph.input), "]",
             "outputs = [", *map(_value_info, graph.output), "]",
             "initializers = [", *(f"    {_array(t)}," for t in graph.initializer), "]",
             f"graph = helper.make_graph(nodes, {graph.name!r}, inputs, outputs, "
             "initializer=initializers)",
             f"model = helper.make_model(graph, opset_imports=[{opsets}])",
             f"model.ir_version = {model.ir_version}",
             "from_onnx(model)", 'print("from_onnx succeeded")', ""]
    return "\n".join(lines)
