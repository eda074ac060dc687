"""The framework's own answer for a script that imports a model with TVM's Relax frontends.

A report that builds a model with ONNX or PyTorch and imports it (from_onnx,
from_exported_program, from_fx) is also run by its framework, on the inputs TVM's VM was
given: ONNX Runtime (CPUExecutionProvider) for an ONNX model, eager PyTorch for an
ExportedProgram (`ep.module()`) or an fx GraphModule. The result then carries TVM's outputs
(`outputs`), the framework's (`reference_outputs`) and which framework gave them
(`reference_kind`), and a wrong result shows as `outputs: differs` against it
(tvmrepro/outputs.py compares the two).

Hooks, in script mode only:
- the importers, wherever TVM's frontend modules hold them (over the tracer's `frontend`
  stage where a frontend flavour loaded them first; else as the script imports them: a finder on
  sys.meta_path hooks a frontend module as it loads, so a plain environment, where none
  loads, pays a name check per import and never imports torch or onnx);
- the Relax VM's function lookup, chained over the tracer's (its `run` stage stays inside):
  only a call of an imported module's entry is captured, the last one, its inputs copied
  before the call (which may update them in place) and its output kept.
The reference runs once the script is over (ok, or failing in an assert of its own after the
call), only where such a call was made; a failing reference never changes the run's status:
`reference_error` says why.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import re
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .inputs import summarize, var_name

# TVM's importers, by module: the kind of model each takes, and the name of that argument.
IMPORTERS = {"tvm.relax.frontend.onnx": {"from_onnx": ("onnx", "model")},
             "tvm.relax.frontend.torch": {"from_exported_program": ("exported_program",
                                                                    "exported_program"),
                                          "from_fx": ("fx", "model")}}
FRONTEND_PACKAGE = "tvm.relax.frontend."
ENTRY = "main"  # the function every importer makes
# At most this long for the reference, and never past the run's limit less MARGIN_S.
REFERENCE_CAP_S, MARGIN_S = 60.0, 2.0
_IR_REFUSED = re.compile(r"max supported IR version: (\d+)")


@dataclass
class Imported:
    """A model TVM imported: the framework's object and the entry's parameters."""

    kind: str  # onnx, exported_program or fx
    model: Any
    params: list[str]  # the entry's parameter names, in order
    num_input: int | None  # where parameters follow the inputs (keep_params_*_input)


@dataclass
class Call:
    """The last VM call of an imported module's entry: its inputs (copies) and output."""

    imported: Imported
    inputs: list[np.ndarray]
    output: Any


class _AsTensor:
    """A numpy array shown to `summarize` like a TVM tensor."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def numpy(self) -> np.ndarray:
        """The array itself."""
        return self.array


def summary_of(value: Any) -> Any:
    """A framework's outputs (arrays, nested in lists) summarized as TVM's are."""
    if isinstance(value, list | tuple):
        return [summary_of(item) for item in value]
    return summarize(_AsTensor(np.asarray(value)))


class References:
    """The hooks of one run and what they saw."""

    def __init__(self, timeout_s: float) -> None:
        self.imported: list[Imported] = []
        self.last: Call | None = None
        self.importing = 0  # importers running now: the passes they run are theirs
        self.on_import: list[Any] = []  # called with (importer's name, module) as one returns
        self.on_call: list[Any] = []  # called with (kind, model) as an importer is called
        self.reference_arrays: Any = None  # the framework's outputs, as arrays
        self.hooked: set[str] = set()
        self.deadline = time.monotonic() + timeout_s - MARGIN_S

    # -- the importers ----------------------------------------------------------------------
    def hook_module(self, name: str) -> None:
        """Wrap the importers of a loaded frontend module, wherever the frontends hold them."""
        module = sys.modules.get(name)
        if module is None or name in self.hooked:
            return
        self.hooked.add(name)
        wrapped = {}
        for attr, (kind, argument) in IMPORTERS[name].items():
            original = getattr(module, attr, None)
            if callable(original):
                wrapped[id(original)] = self._importer(original, kind, argument)
        _replace_in_frontends(wrapped)

    def _importer(self, original: Any, kind: str, argument: str) -> Any:
        references = self

        @functools.wraps(original)
        def importing(*args: Any, **kwargs: Any) -> Any:
            for listener in references.on_call:  # before it runs: an import that fails too
                listener(kind, args[0] if args else kwargs.get(argument))
            references.importing += 1
            try:
                mod = original(*args, **kwargs)
            finally:
                references.importing -= 1
            with contextlib.suppress(Exception):  # an odd call is the script's business
                model = args[0] if args else kwargs.get(argument)
                references.record(kind, model, mod)
            for listener in references.on_import:
                listener(original.__name__, mod)
            return mod

        return importing

    def record(self, kind: str, model: Any, mod: Any) -> None:
        """Remember an imported module's model and its entry's parameters."""
        func = mod[ENTRY]
        attrs = getattr(func, "attrs", None)
        num_input = attrs.get("num_input") if attrs is not None else None
        self.imported.append(Imported(kind=kind, model=model,
                                      params=[var_name(p) for p in func.params],
                                      num_input=int(num_input) if num_input is not None else None))

    # -- the VM ---------------------------------------------------------------------------
    def hook_vm(self, tvm: Any) -> None:
        """Capture calls of an imported entry, around whatever VM lookup is installed now."""
        vm_cls = tvm.relax.VirtualMachine
        lookup = vm_cls.__getitem__
        references = self

        @functools.wraps(lookup)
        def getitem(vm: Any, key: Any) -> Any:
            func = lookup(vm, key)
            if key != ENTRY or not references.imported:
                return func
            return references._capturing(func)

        vm_cls.__getitem__ = getitem

    def _capturing(self, func: Any) -> Any:
        references = self

        def call(*args: Any, **kwargs: Any) -> Any:
            inputs = _copies(args) if not kwargs else None
            output = func(*args, **kwargs)
            imported = references.imported_for(len(args))
            if inputs is not None and imported is not None:
                references.last = Call(imported=imported, inputs=inputs, output=output)
            return output

        return call

    def imported_for(self, count: int) -> Imported | None:
        """The module a call with `count` arguments ran: the newest import taking that many."""
        return next((m for m in reversed(self.imported) if len(m.params) == count), None)

    # -- the answer -------------------------------------------------------------------------
    def fields(self) -> dict[str, Any]:
        """TVM's outputs and the framework's on the same inputs: result fields ({} where no
        imported entry was called)."""
        call = self.last
        if call is None:
            return {}
        found: dict[str, Any] = {}
        try:
            found["outputs"] = summarize(call.output)
            left = min(REFERENCE_CAP_S, self.deadline - time.monotonic())
            if left <= 0:
                raise TimeoutError("not run: the run's time limit is near")
            with _time_limit(left):
                run = _onnx_reference if call.imported.kind == "onnx" else _torch_reference
                self.reference_arrays = run(call, found)
                found["reference_outputs"] = summary_of(self.reference_arrays)
        except BaseException as exc:  # the reference's failure is said, never the run's
            found["reference_error"] = _said(exc)
        return found


def _replace_in_frontends(wrapped: dict[int, Any]) -> None:
    """Point what TVM's frontend modules hold (the package and the module that defines each
    importer: `from tvm.relax.frontend.onnx.onnx_frontend import from_onnx` works too) at the
    wrappers, by the id of what they wrap. Only those modules are scanned: that is where a
    script takes an importer from."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(FRONTEND_PACKAGE) or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if id(value) in wrapped:
                setattr(module, attr, wrapped[id(value)])


def _copies(args: tuple[Any, ...]) -> list[np.ndarray] | None:
    """The arguments as numpy arrays of their own; None where one is not an array."""
    copies = []
    for arg in args:
        try:
            if isinstance(arg, np.ndarray):
                copies.append(arg.copy())
            elif hasattr(arg, "numpy"):
                copies.append(np.array(arg.numpy(), copy=True))
            else:
                return None
        except Exception:  # a tensor that cannot be read back: no reference for this call
            return None
    return copies


def _said(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:2000]


@contextlib.contextmanager
def _time_limit(seconds: float) -> Any:
    """Raise TimeoutError in Python code running past `seconds` (native code ends first)."""
    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"the reference ran past its {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _onnx_reference(call: Call, found: dict[str, Any]) -> Any:
    """ONNX Runtime's outputs for the captured inputs (graph inputs by name, else position),
    as arrays."""
    import onnxruntime

    found["reference_kind"] = f"onnxruntime {onnxruntime.__version__}"
    session = _session(onnxruntime, call.imported.model, found)
    params = call.imported.params
    feeds = {}
    for index, given in enumerate(session.get_inputs()):
        where = params.index(given.name) if given.name in params else index
        feeds[given.name] = call.inputs[where]
    outputs = session.run(None, feeds)
    return outputs[0] if len(outputs) == 1 else outputs


def _session(onnxruntime: Any, model: Any, found: dict[str, Any]) -> Any:
    """A CPU session of the model; one whose IR version is newer than this onnxruntime takes
    is lowered, on a copy, to the newest it does (and the result says so)."""
    # The session's own __init__: the `model` stage's wrapper (frontends.py) is the script's.
    cls = onnxruntime.InferenceSession
    init = inspect.unwrap(cls.__init__)

    def session_of(proto: Any) -> Any:
        session = cls.__new__(cls)
        init(session, proto.SerializeToString(), providers=["CPUExecutionProvider"])
        return session

    try:
        return session_of(model)
    except Exception as exc:
        refused = _IR_REFUSED.search(str(exc))
        if refused is None or model.ir_version <= int(refused.group(1)):
            raise
    lowered = type(model)()
    lowered.CopyFrom(model)
    lowered.ir_version = int(refused.group(1))
    found["reference_note"] = (f"the model's IR version {model.ir_version} is newer than "
                               f"onnxruntime takes: run with IR version {lowered.ir_version} "
                               f"on a copy")
    return session_of(lowered)


def _torch_reference(call: Call, found: dict[str, Any]) -> Any:
    """Eager PyTorch's outputs for the captured inputs (the model's own inputs only), as
    arrays."""
    import torch

    found["reference_kind"] = f"torch {torch.__version__} eager"
    imported = call.imported
    count = imported.num_input if imported.num_input is not None else len(imported.params)
    tensors = [torch.from_numpy(array) for array in call.inputs[:count]]
    module = imported.model.module() if imported.kind == "exported_program" else imported.model
    with torch.no_grad():
        value = module(*tensors)
    return _numpy_tree(torch, value)


def _numpy_tree(torch: Any, value: Any) -> Any:
    """A torch result as numpy arrays in lists (None left out: TVM returns nothing for it)."""
    if isinstance(value, list | tuple):
        return [_numpy_tree(torch, item) for item in value if item is not None]
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16; TVM's is ml_dtypes'
            import ml_dtypes

            return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return tensor.numpy()
    return np.asarray(value)


class _FrontendFinder(importlib.abc.MetaPathFinder):
    """Hooks a frontend module as it loads (where no frontend flavour loaded it first)."""

    def __init__(self, references: References) -> None:
        self.references = references

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in IMPORTERS or name in self.references.hooked:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute, references = loader.exec_module, self.references

        def exec_module(module: Any) -> None:
            execute(module)
            references.hook_module(name)

        loader.exec_module = exec_module
        return spec


def install(tvm: Any, timeout_s: float) -> References:
    """Hook the importers (those loaded now, the others as they load) and the VM's lookup."""
    references = References(timeout_s)
    for name in IMPORTERS:
        references.hook_module(name)
    if any(name not in references.hooked for name in IMPORTERS):
        sys.meta_path.insert(0, _FrontendFinder(references))
    references.hook_vm(tvm)
    return references
