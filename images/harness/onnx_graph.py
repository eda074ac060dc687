"""An ONNX model's graph, reduced in the sandbox where onnx is: edits, their import, its script.

A frontend report whose failure is in TVM's ONNX importer is reduced as a graph, not as a
module (there is none: the importer never returned). Three harness modes serve the driver
(worker/narrowing/onnx_reduce.py), which never imports onnx itself:
- capture (`onnx_capture`, over a script run): the ModelProto the script gives `from_onnx`,
  as the importer's hook (references.py) sees it before the importer runs, as an `onnx_model`
  event (its serialized bytes in base64);
- `onnx_candidates`: a model and a list of edits; each edit is applied and the edited model
  imported with `from_onnx`, one `onnx_candidate` event each (how the import ended, classified
  as a run's failure is, and the edited model), all in one sandbox;
- the `onnx_graph` event of each: its nodes, its graph inputs' shapes, and the model written
  as a short `onnx.helper` script that builds it and calls `from_onnx` on it.

An edit drops nodes (by index): what a dropped node made that a kept node reads becomes a
graph input of the type shape inference gives it (a dropped Constant's value, an initializer
of that name, so the importer still sees a constant); what a dropped node read from a kept
node becomes a graph output; inputs, initializers and outputs nothing uses any more go. Or
it makes one graph input's static dimensions 1 (`ones`), or drops one graph output
(`unoutput`).
"""

from __future__ import annotations

import base64
import contextlib
from typing import Any

from .classify import classify
from .events import EventSink

FRONTEND_STAGE = "frontend"


def encoded(model: Any) -> str:
    return base64.b64encode(model.SerializeToString()).decode()


def decoded(text: str) -> Any:
    import onnx

    return onnx.load_from_string(base64.b64decode(text))


def emit_model(sink: EventSink, kind: str, model: Any) -> None:
    """The `onnx_model` event for a model given to an importer (listener of references.py)."""
    if kind == "onnx":
        with contextlib.suppress(Exception):  # not a ModelProto: a path, bytes: not reduced
            sink.emit("onnx_model", model=encoded(model), nodes=len(model.graph.node))


def _types(model: Any) -> dict[str, Any]:
    """Each value's type as shape inference (or the graph itself) gives it."""
    import onnx

    with contextlib.suppress(Exception):
        model = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    return {v.name: v.type for v in [*graph.value_info, *graph.input, *graph.output]}


def _value_info(name: str, types: dict[str, Any]) -> Any:
    from onnx import ValueInfoProto

    info = ValueInfoProto(name=name)
    if name in types:
        info.type.CopyFrom(types[name])
    return info


def _constant_value(node: Any) -> Any:
    """A Constant node's tensor (its `value` attribute), named as its output; else None."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
        return None
    for attr in node.attribute:
        if attr.name == "value":
            tensor = type(attr.t)()
            tensor.CopyFrom(attr.t)
            tensor.name = node.output[0]
            return tensor
    return None


def drop_nodes(model: Any, drop: set[int]) -> Any:
    """The model without the nodes at `drop`, rewired as the module's docstring says."""
    import onnx

    types = _types(model)
    new = onnx.ModelProto()
    new.CopyFrom(model)
    graph = new.graph
    kept = [n for i, n in enumerate(graph.node) if i not in drop]
    dropped = [n for i, n in enumerate(graph.node) if i in drop]
    made = {o for n in kept for o in n.output}
    read = {i for n in kept for i in n.input if i}
    outputs = [o.name for o in graph.output]
    inits = {t.name for t in graph.initializer}
    new_inputs, new_inits = [], []
    for node in dropped:
        value = _constant_value(node)
        for name in node.output:
            if name in read or name in outputs:
                if value is not None and name == node.output[0]:
                    new_inits.append(value)
                else:
                    new_inputs.append(_value_info(name, types))
        for name in node.input:
            if name and name in made and name not in outputs and name not in read:
                outputs.append(name)
    del graph.node[:]
    graph.node.extend(kept)
    graph.initializer.extend(new_inits)
    graph.input.extend(new_inputs)
    _rewire_outputs(graph, outputs, types)
    _prune(graph, inits | {t.name for t in new_inits})
    return new


def _rewire_outputs(graph: Any, outputs: list[str], types: dict[str, Any]) -> None:
    """Graph outputs: those that are still made (or given), then the new ones, in order."""
    have = {o.name: o for o in graph.output}
    available = ({o for n in graph.node for o in n.output} | {i.name for i in graph.input}
                 | {t.name for t in graph.initializer})
    infos = [have[name] if name in have else _value_info(name, types)
             for name in dict.fromkeys(outputs) if name in available]
    del graph.output[:]
    graph.output.extend(infos)


def _prune(graph: Any, initializers: set[str]) -> None:
    """Drop inputs and initializers nothing reads (nor gives out), and repeated inputs."""
    used = {i for n in graph.node for i in n.input if i} | {o.name for o in graph.output}
    keep_inputs, seen = [], set()
    for info in graph.input:
        if info.name in used and info.name not in seen and info.name not in initializers:
            keep_inputs.append(info)
            seen.add(info.name)
    inits = [t for t in graph.initializer if t.name in used]
    del graph.input[:]
    graph.input.extend(keep_inputs)
    del graph.initializer[:]
    graph.initializer.extend(inits)


def ones(model: Any, name: str) -> Any:
    """The model with graph input `name`'s static dimensions each 1 (outputs' shapes dropped:
    they follow from the inputs)."""
    import onnx

    new = onnx.ModelProto()
    new.CopyFrom(model)
    for info in new.graph.input:
        if info.name == name and info.type.HasField("tensor_type"):
            for dim in info.type.tensor_type.shape.dim:
                if dim.HasField("dim_value"):
                    dim.dim_value = 1
    for info in new.graph.output:
        if info.type.HasField("tensor_type"):
            info.type.tensor_type.ClearField("shape")
    return new


def without_output(model: Any, name: str) -> Any:
    """The model without graph output `name` (what only it needed goes with it, as nodes
    that nothing reads are dropped then)."""
    import onnx

    new = onnx.ModelProto()
    new.CopyFrom(model)
    kept = [o for o in new.graph.output if o.name != name]
    del new.graph.output[:]
    new.graph.output.extend(kept)
    return new


def edited(model: Any, edit: dict[str, Any]) -> Any:
    if "drop" in edit:
        return drop_nodes(model, set(edit["drop"]))
    if "ones" in edit:
        return ones(model, edit["ones"])
    if "unoutput" in edit:
        return without_output(model, edit["unoutput"])
    return model


def imported(model: Any) -> dict[str, Any]:
    """How `from_onnx` ends on the model: ok, or the failure classified as a run's is."""
    from tvm.relax.frontend.onnx import from_onnx

    try:
        from_onnx(model)
    except Exception as exc:  # the candidate's failure is its verdict
        outcome = classify(exc)
        return {"status": outcome.status, "stage": FRONTEND_STAGE,
                "error_type": outcome.error_type, "message": outcome.message,
                "signature": outcome.signature}
    return {"status": "ok", "stage": None}


def described(model: Any) -> dict[str, Any]:
    """The `onnx_graph` fields of a model: its nodes, its inputs' static shapes, its script."""
    from .onnx_script import helper_script

    shapes = {}
    for info in model.graph.input:
        if info.type.HasField("tensor_type"):
            shapes[info.name] = [d.dim_value if d.HasField("dim_value") else None
                                 for d in info.type.tensor_type.shape.dim]
    return {"nodes": len(model.graph.node), "ops": [n.op_type for n in model.graph.node],
            "shapes": shapes, "outputs": [o.name for o in model.graph.output], "script": helper_script(model)}


def judge_candidates(case: dict[str, Any], sink: EventSink) -> None:
    """The `onnx_candidates` mode: each edit of the model, imported; an `onnx_candidate` event
    each (the run's fields and the edited model described)."""
    from .frontends import import_frontends

    import_frontends()
    request = case["harness"]
    model = decoded(request["model"])
    sink.emit("start", tvm={})
    sink.emit("onnx_graph", index=-1, **described(model))
    for index, edit in enumerate(request.get("edits") or []):
        try:
            candidate = edited(model, edit)
            fields = imported(candidate)
            sink.emit("onnx_candidate", index=index, model=encoded(candidate),
                      fields=fields, **described(candidate))
        except Exception as exc:  # an edit the graph cannot take: not a candidate
            sink.emit("onnx_candidate", index=index, model=None,
                      fields={"status": "infra_error", "message": repr(exc)[:500]})
