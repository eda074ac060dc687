"""Relay-era ONNX reports carried over onto Relax's ONNX frontend.

A report that imports `tvm.relay` to import an ONNX model (`relay.frontend.from_onnx`), build it
(`relay.build`, `relay.create_executor`) and run it (`tvm.contrib.graph_executor`) asks of Relay
only what Relax still does: the import, a build and a run. For such a script (told by its text:
a Relay import and a call of `from_onnx`) the harness serves `tvm.relay` and
`tvm.contrib.graph_executor` with the few calls below, each made on Relax:
- `relay.frontend.from_onnx(model, shape, dtype, opset)`: `tvm.relax.frontend.onnx.from_onnx`,
  returning (mod, {}): Relax keeps the initializers bound as constants, so there are no params;
- `relay.build(mod, target, params=...)`: `tvm.compile` (or `relax.build` where a release lacks
  it), whose default pipeline legalizes and builds;
- `graph_executor.GraphModule(lib["default"](dev))` and `relay.create_executor(...).evaluate()`:
  the Relax VM, inputs matched to `main`'s parameters by name or position.
Anything else of Relay (its passes, ops, analysis, testing) has no counterpart here: reaching
for it raises NotCarried, and the run ends `incompatible`, naming what was asked for.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from .relay_era import RelayRemoved, RemovedModuleFinder

# Under the 128 characters a result keeps of each rewrite (worker/runner.py).
NOTE = ("Relay-era ONNX carried over: from_onnx -> relax.frontend.onnx, relay.build -> "
        "tvm.compile, graph executor -> Relax VM")
CARRIED = ("relay.frontend.from_onnx", "relay.build", "relay.create_executor",
           "tvm.contrib.graph_executor")
# Relay's own submodules: read off `relay` they stand in until one of their names is used, so
# that the message names the pass or op the script wanted (tvm.relay.transform.FoldConstant).
_SUBMODULES = frozenset({"transform", "analysis", "testing", "op", "nn", "qnn", "vision", "image",
                         "backend", "dataflow_pattern", "quantize", "ty", "expr", "function",
                         "vm", "build_module", "frontend"})


class NotCarried(RelayRemoved):
    """A Relay API that the carry-over does not provide (an import or an attribute)."""

    def __init__(self, name: str) -> None:
        Exception.__init__(self, f"{name} has no Relax counterpart here (only "
                                 f"{', '.join(CARRIED)} are carried over from Relay)")
        self.module = name


def _relay_imported(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
                alias.name == "tvm.relay" or alias.name.startswith("tvm.relay.")
                for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (
                (node.module == "tvm" and any(a.name == "relay" for a in node.names))
                or (node.module or "").startswith("tvm.relay")):
            return True
    return False


def _relay_from_onnx(tree: ast.AST, source: str) -> bool:
    """Relay's from_onnx named: `relay.frontend.from_onnx`, or imported from its module (not
    Relax's, which a script that only tries `from tvm import relay` may use)."""
    if re.search(r"\brelay\.frontend\.from_onnx\b", source):
        return True
    return any(isinstance(node, ast.ImportFrom) and node.level == 0
               and (node.module or "").startswith("tvm.relay.frontend")
               and any(alias.name == "from_onnx" for alias in node.names)
               for node in ast.walk(tree))


def wanted(source: str) -> bool:
    """Whether `source` imports tvm.relay and uses Relay's ONNX frontend."""
    if "from_onnx" not in source:
        return False
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return _relay_imported(tree) and _relay_from_onnx(tree, source)


class _Stand(ModuleType):
    """A module of carried names; any other public name raises NotCarried."""

    def __init__(self, name: str, members: dict[str, Any]) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__dict__.update(members)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        if self.__name__ == "tvm.relay" and attr in _SUBMODULES:
            return _Stand(f"tvm.relay.{attr}", {})
        raise NotCarried(f"{self.__name__}.{attr}")


def _tvm() -> Any:
    return importlib.import_module("tvm")


def from_onnx(model: Any, shape: dict[str, Any] | None = None, dtype: Any = "float32",
              opset: int | None = None, freeze_params: bool = True, **_: Any
              ) -> tuple[Any, dict[str, Any]]:
    """Relay's from_onnx on Relax's importer; (mod, {}) since Relax keeps the weights bound."""
    frontend = importlib.import_module("tvm.relax.frontend.onnx")
    shape_dict = {name: list(dims) for name, dims in shape.items()} if shape else None
    mod = frontend.from_onnx(model, shape_dict=shape_dict, dtype_dict=dtype, opset=opset)
    return mod, {}


class Factory:
    """What relay.build returned: `lib["default"](dev)` makes the module a GraphModule wraps.
    Unpacked as Relay's oldest API did (`graph, lib, params = relay.build(...)`)."""

    def __init__(self, executable: Any, mod: Any) -> None:
        self.executable, self.ir_mod = executable, mod

    def __getitem__(self, name: str) -> Callable[[Any], Bound]:
        return lambda device: Bound(self, device)

    def __iter__(self) -> Any:
        return iter((self, self, {}))


class Bound:
    """A built module on a device (what `lib["default"](dev)` gave)."""

    def __init__(self, factory: Factory, device: Any) -> None:
        self.factory, self.device = factory, device


def build(mod: Any, target: Any = None, target_host: Any = None, params: Any = None,
          **_: Any) -> Factory:
    """relay.build on Relax: tvm.compile's default pipeline (relax.build on a release without
    tvm.compile); `params` are bound in the module already."""
    tvm = _tvm()
    compile_ = getattr(tvm, "compile", None) or tvm.relax.build
    return Factory(compile_(mod, target=target or "llvm"), mod)


def _input_names(mod: Any) -> list[str]:
    # Var.name_hint became Var.name in 0.27.
    return [str(getattr(p, "name_hint", None) or p.name) for p in mod["main"].params]


def _index(names: Sequence[str], name: str) -> int:
    """The position of the input `name` (as ONNX spelt it, or as the importer sanitized it)."""
    for candidate in (name, re.sub(r"\W", "_", name)):
        if candidate in names:
            return names.index(candidate)
    raise KeyError(f"the model has no input named {name!r} (its inputs: {list(names)})")


def _tensor(value: Any, device: Any) -> Any:
    runtime = _tvm().runtime
    if hasattr(value, "numpy") or not hasattr(value, "shape"):
        return value
    make = getattr(runtime, "tensor", None) or _tvm().nd.array
    return make(value, device)


def _outputs(result: Any) -> list[Any]:
    return [result] if hasattr(result, "numpy") or not hasattr(result, "__len__") else \
        list(result)


class GraphModule:
    """Relay's graph executor over the Relax VM: set_input, run, get_output."""

    def __init__(self, module: Bound) -> None:
        if not isinstance(module, Bound):
            raise NotCarried("tvm.contrib.graph_executor.GraphModule of a module not made by "
                             "relay.build")
        self._device = module.device
        self._names = _input_names(module.factory.ir_mod)
        self._vm = _tvm().relax.VirtualMachine(module.factory.executable, module.device)
        self._inputs: list[Any] = [None] * len(self._names)
        self._results: list[Any] = []

    def set_input(self, key: Any = None, value: Any = None, **params: Any) -> None:
        if key is not None:
            index = key if isinstance(key, int) else _index(self._names, str(key))
            self._inputs[index] = _tensor(value, self._device)
        for name, param in params.items():
            self.set_input(name, param)

    def run(self, **inputs: Any) -> None:
        self.set_input(**inputs)
        missing = [n for n, v in zip(self._names, self._inputs, strict=True) if v is None]
        if missing:
            raise ValueError(f"inputs not set: {missing}")
        self._results = _outputs(self._vm["main"](*self._inputs))

    def get_output(self, index: int, out: Any = None) -> Any:
        return self._results[index]

    def get_num_outputs(self) -> int:
        return len(self._results)

    def get_num_inputs(self) -> int:
        return len(self._names)

    def get_input(self, key: Any) -> Any:
        return self._inputs[key if isinstance(key, int) else _index(self._names, str(key))]


def create(graph: Any, lib: Any, device: Any) -> GraphModule:
    """graph_executor.create(graph, lib, dev) of Relay's oldest build API."""
    return GraphModule(lib["default"](device) if isinstance(lib, Factory) else lib)


class Executor:
    """relay.create_executor(kind, mod, device, target): evaluate() gives the model's function."""

    def __init__(self, kind: str = "debug", mod: Any = None, device: Any = None,
                 target: Any = "llvm", params: Any = None, **_: Any) -> None:
        if mod is None:
            raise NotCarried("tvm.relay.create_executor without mod=")
        self.mod, self.device, self.target = mod, device or _tvm().cpu(0), target

    def evaluate(self, expr: Any = None, binds: Any = None) -> Callable[..., Any]:
        if expr is not None:
            raise NotCarried("tvm.relay.create_executor(...).evaluate(expr)")
        graph = GraphModule(build(self.mod, target=self.target)["default"](self.device))

        def call(*args: Any, **kwargs: Any) -> Any:
            for index, value in enumerate(args):
                graph.set_input(index, value)
            graph.run(**kwargs)
            outputs = [graph.get_output(i) for i in range(graph.get_num_outputs())]
            return outputs[0] if len(outputs) == 1 else outputs

        return call


def _modules() -> dict[str, _Stand]:
    passes = _tvm().transform
    frontend = _Stand("tvm.relay.frontend", {"from_onnx": from_onnx})
    build_module = _Stand("tvm.relay.build_module", {"build": build, "create_executor": Executor})
    relay = _Stand("tvm.relay", {"frontend": frontend, "build_module": build_module,
                                 "build": build, "create_executor": Executor,
                                 "build_config": passes.PassContext})
    executor = _Stand("tvm.contrib.graph_executor", {"GraphModule": GraphModule,
                                                     "create": create})
    return {"tvm.relay": relay, "tvm.relay.frontend": frontend,
            "tvm.relay.build_module": build_module, "tvm.contrib.graph_executor": executor,
            "tvm.contrib.graph_runtime": executor}


class NotCarriedFinder:
    """Answers an import of any other tvm.relay module with NotCarried (before relay_era's)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname.startswith("tvm.relay."):
            raise NotCarried(fullname)
        return None


def install() -> None:
    """Serve the carried modules (in sys.modules and as attributes of their parents)."""
    for name, module in _modules().items():
        sys.modules[name] = module
        parent, _, leaf = name.rpartition(".")
        setattr(importlib.import_module(parent), leaf, module)
    removed = [i for i, f in enumerate(sys.meta_path) if isinstance(f, RemovedModuleFinder)]
    sys.meta_path.insert(removed[0] if removed else len(sys.meta_path), NotCarriedFinder())
