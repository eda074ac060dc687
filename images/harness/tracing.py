"""Stage tracing by instrumenting TVM itself, so even an arbitrary script reports where it failed.

Three hooks, installed before user code runs:
- a PassInstrument in every PassContext (the default one included) that names
  each top-level pass `pass:<index>:<Name>`, follows the passes nested in it
  (a Sequential, a pipeline such as `_pipeline`) so that the stage names the
  innermost pass running (`pass:<index>:<Inner>`, its `pass_path` the chain
  from the top-level pass down), and records the function table and TVMScript
  after each top-level pass;
- wrappers around the TVMScript parser's one entry (stage `parse`: the
  decorators and `tvm.script.from_source`), relax.build / tvm.compile /
  tirx.build (`build`), and the Relax VM's constructor (`vm_init`) and
  function calls (`run`), wherever TVM's modules hold a reference to them;
- a wrapper around Pass.__call__ that stamps a failing pass's exception with
  its stage and pass path (the instrument never hears about a pass that raised).
An exception that leaves an instrumented boundary carries the stage it was
raised in (attribute STAGE_ATTR), so the top level can tell a `vm_init`
failure from one in the user's own Python.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import sys
import time
from collections.abc import Callable
from typing import Any

from . import frontends
from .events import EventSink

STAGE_ATTR = "_tvmrepro_stage"
PATH_ATTR = "_tvmrepro_pass_path"
IR_CAP_CHARS = 512 * 1024
_TRANSPARENT_PASSES = {"sequential", "Sequential"}


def _stamped(exc: BaseException, attr: str) -> Any:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        value = getattr(current, attr, None)
        if value:
            return value
        current = current.__cause__ or current.__context__
    return None


def stage_of(exc: BaseException) -> str | None:
    """The stage stamped on this exception or on one it was raised from."""
    stage = _stamped(exc, STAGE_ATTR)
    return str(stage) if stage else None


def pass_path_of(exc: BaseException) -> list[str] | None:
    """The chain of passes (outermost first) that was running when this exception was raised."""
    path = _stamped(exc, PATH_ATTR)
    return list(path) if path else None


def _stamp(exc: BaseException, stage: str, path: list[str] | None = None) -> None:
    if getattr(exc, STAGE_ATTR, None) is None:
        # Some C-level exceptions take no attributes; the stage event still names the stage.
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, STAGE_ATTR, stage)
            if path:
                setattr(exc, PATH_ATTR, list(path))


# Where TVM's modules hold each value (id -> (module, attribute) pairs), built by one scan of
# each module: a zygote makes it once (index_references) and every run it forks scans only the
# modules imported since, instead of every module for each hook (0.03 s of each run).
_REFERENCES: dict[int, list[tuple[Any, str]]] = {}
_INDEXED: set[str] = set()


def import_dialects() -> None:
    """TVMScript's dialects (a release has tirx or tir, or both)."""
    for dialect in ("ir", "relax", "tirx", "tir"):
        with contextlib.suppress(ImportError):
            importlib.import_module(f"tvm.script.{dialect}")


def index_references() -> None:
    """Index what the TVM modules loaded since the last call hold."""
    for name, module in list(sys.modules.items()):
        if name in _INDEXED or (name != "tvm" and not name.startswith("tvm.")):
            continue
        _INDEXED.add(name)
        for attr, value in list(vars(module).items()):
            if callable(value):
                _REFERENCES.setdefault(id(value), []).append((module, attr))


def add_to_every_context(tvm: Any, instrument: Any) -> None:
    """Every PassContext made from now on carries `instrument` (once), the default one too:
    passes run outside any `with PassContext` use the current default one, which is replaced."""
    context_cls = tvm.transform.PassContext
    original_init = context_cls.__init__
    signature = inspect.signature(original_init)

    @functools.wraps(original_init)
    def init(ctx: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(ctx, *args, **kwargs)
        instruments = list(bound.arguments.get("instruments") or [])
        if instrument not in instruments:
            instruments.append(instrument)
        bound.arguments["instruments"] = instruments
        original_init(*bound.args, **bound.kwargs)

    context_cls.__init__ = init
    context_cls(opt_level=2).__enter__()


def replace_everywhere(original: Any, replacement: Any) -> None:
    """Point every reference that TVM's loaded modules hold to `original` at `replacement`.

    `from ..core.entry import parse` copies a function into many modules; patching
    one attribute would miss the decorators that call their own copy.
    """
    index_references()
    for module, attr in _REFERENCES.get(id(original), []):
        if vars(module).get(attr) is original:  # the index is by id: the object itself, still
            setattr(module, attr, replacement)
            _REFERENCES.setdefault(id(replacement), []).append((module, attr))


def _attr_value(value: Any) -> Any:
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return value
    inner = getattr(value, "value", None)
    if isinstance(inner, int | float | str):
        return inner
    return str(value)


def function_table(mod: Any) -> list[dict[str, Any]]:
    """Name, kind (Function | PrimFunc | ...) and attributes of every function in an IRModule."""
    table = []
    for gvar, func in mod.functions.items():
        attrs = getattr(func, "attrs", None)
        table.append(
            {
                "name": gvar.name_hint,
                "kind": type(func).__name__,
                "attrs": {str(k): _attr_value(v) for k, v in attrs.items()} if attrs else {},
            }
        )
    table.sort(key=lambda f: f["name"])
    return table


def module_text(mod: Any) -> str:
    """The module as TVMScript, capped so one huge module cannot flood the result."""
    try:
        text = mod.script()
    except Exception as exc:  # printing is best effort: the pass itself succeeded
        return f"<could not print the module: {type(exc).__name__}: {exc}>"
    if len(text) > IR_CAP_CHARS:
        return text[:IR_CAP_CHARS] + f"\n# ... truncated at {IR_CAP_CHARS} characters\n"
    return text


class Tracer:
    """Knows the current stage and reports it, and every completed top-level pass, as events."""

    def __init__(self, sink: EventSink, idle_stage: str | None) -> None:
        self.sink = sink
        # The stage between instrumented calls: "script" for scripts; None in module
        # mode, where the harness names every stage itself.
        self.idle_stage = idle_stage
        self.stage = ""
        self.pass_count = 0
        self.pass_stack: list[str] = []  # the passes running now, outermost first
        self.build_depth = 0
        self.reached: str | None = None  # the last TVM stage a script entered
        # (stage, pass path) where the innermost failing pass raised: an exception crossing
        # the FFI back out of a Python pass (a pipeline) arrives as a new object, unstamped.
        self.failure: tuple[str, list[str]] | None = None
        self._script_running = False
        self._pass_started = 0.0

    @property
    def depth(self) -> int:
        """How many passes are running now, nested ones included."""
        return len(self.pass_stack)

    @property
    def pass_path(self) -> list[str] | None:
        """The passes running now, outermost first (None outside passes or inside a build)."""
        return list(self.pass_stack) if self.pass_stack and self.build_depth == 0 else None

    def enter(self, stage: str) -> None:
        """Move to a stage and tell the runtime at once (a crash may follow)."""
        # Parsing is not remembered: a parse failure is stamped where it is raised (the parse
        # hook), so what fails after it (a Sequential built of a non-pass) is the script's.
        if self._script_running and stage not in (self.idle_stage, "parse"):
            self.reached = stage
        if stage != self.stage:
            self.stage = stage
            if stage == self.idle_stage and self.reached:
                # Back in the script after a TVM stage: a crash from here on (glibc finding a
                # heap TVM corrupted, at the next free) reads as that stage, as final_stage
                # says of an exception.
                return
            path = self.pass_path if stage.startswith("pass:") else None
            self.sink.emit("stage", stage=stage, **({"pass_path": path} if path else {}))

    def start_script(self) -> None:
        """The script's own code starts: from now on, TVM stages it enters are remembered."""
        self.enter(self.idle_stage or "script")
        self._script_running = True

    def final_stage(self) -> str:
        """Where a run ended: the stage now, or between TVM calls the last TVM stage entered.

        A script that checks a result after the VM call (`assert np.allclose(...)`) failed
        where users mean it: at `run`; only before any TVM step is it `script`.
        """
        if self.stage == self.idle_stage and self.reached:
            return self.reached
        return self.stage

    def leave(self, finished: str) -> None:
        """Back from an instrumented call: to the idle stage, or stay at `finished` in module mode."""
        self.enter(self.idle_stage or finished)

    # -- the PassInstrument callbacks ------------------------------------------------
    def before_pass(self, mod: Any, info: Any) -> None:
        """Called by TVM before every pass, nested ones included."""
        if info.name in _TRANSPARENT_PASSES:
            return
        self.pass_stack.append(info.name)
        self.failure = None  # a pass starts: any earlier failure was handled
        if self.build_depth == 0:
            self.enter(f"pass:{self.pass_count}:{info.name}")
            if len(self.pass_stack) == 1:
                self._pass_started = time.perf_counter()

    def after_pass(self, mod: Any, info: Any) -> None:
        """Called by TVM after every pass that returned."""
        if info.name in _TRANSPARENT_PASSES or not self.pass_stack:
            return
        self.pass_stack.pop()
        if self.pass_stack and self.build_depth == 0:
            self.enter(f"pass:{self.pass_count}:{self.pass_stack[-1]}")  # back in the enclosing pass
        elif not self.pass_stack and self.build_depth == 0:
            record = {
                "index": self.pass_count,
                "name": info.name,
                "seconds": round(time.perf_counter() - self._pass_started, 6),
                "functions": function_table(mod),
                "ir": module_text(mod),
            }
            self.pass_count += 1
            self.sink.emit("pass", **record)
            self.leave(self.stage)

    # -- installation ---------------------------------------------------------------------
    def install(self, tvm: Any) -> None:
        """Hook the PassContext, Pass.__call__, the parser, the builds and the Relax VM."""
        self._install_pass_hooks(tvm)
        self._install_parse_hooks()
        self._install_build_hooks(tvm)
        self._install_vm_hooks(tvm)
        if frontends.wanted():  # a frontend flavour: its importers and model makers too
            frontends.install(self)

    def _install_pass_hooks(self, tvm: Any) -> None:
        tracer = self

        @tvm.ir.instrument.pass_instrument
        class StageInstrument:
            def run_before_pass(self, mod: Any, info: Any) -> None:
                tracer.before_pass(mod, info)

            def run_after_pass(self, mod: Any, info: Any) -> None:
                tracer.after_pass(mod, info)

        add_to_every_context(tvm, StageInstrument())

        pass_cls = tvm.ir.transform.Pass
        original_call = pass_cls.__call__

        @functools.wraps(original_call)
        def call_stamping_stage(pass_obj: Any, mod: Any) -> Any:
            depth, build_depth = len(tracer.pass_stack), tracer.build_depth
            try:
                return original_call(pass_obj, mod)
            except BaseException as exc:
                # The stack still holds every pass that raised through: the innermost is last.
                if tracer.failure is None or len(tracer.failure[1]) < len(tracer.pass_stack):
                    tracer.failure = (tracer.stage, list(tracer.pass_stack))
                _stamp(exc, *tracer.failure)
                del tracer.pass_stack[depth:]
                tracer.build_depth = build_depth
                raise

        pass_cls.__call__ = call_stamping_stage

    def staged(self, original: Callable[..., Any], stage: str,
                nest_build: bool = False) -> Callable[..., Any]:
        """`original`, entering `stage` while it runs and stamping what it raises."""
        tracer = self

        @functools.wraps(original)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            nested = (nest_build and tracer.build_depth > 0) or tracer.stage == stage
            if not nested:
                tracer.enter(stage)
            tracer.build_depth += 1 if nest_build else 0
            try:
                result = original(*args, **kwargs)
            except BaseException as exc:
                _stamp(exc, tracer.stage, tracer.pass_path)
                raise
            finally:
                tracer.build_depth -= 1 if nest_build else 0
            if not nested:
                tracer.leave(stage)
            return result

        return wrapped

    def wrap_stage(self, owner: Any, name: str, stage: str, nest_build: bool = False) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        setattr(owner, name, self.staged(original, stage, nest_build))

    def wrap_everywhere(self, original: Any, stage: str, nest_build: bool = False) -> None:
        if callable(original):
            replace_everywhere(original, self.staged(original, stage, nest_build))

    def _install_parse_hooks(self) -> None:
        # Every TVMScript decorator (I.ir_module, R.function, T.prim_func) and from_source
        # end in this one function; load the dialects first so their copies are replaced too.
        import_dialects()
        entry = sys.modules.get("tvm.script.parser.core.entry")
        if entry is not None:
            self.wrap_everywhere(entry.parse, "parse")

    def _install_build_hooks(self, tvm: Any) -> None:
        self.wrap_everywhere(tvm.relax.build, "build", nest_build=True)
        self.wrap_everywhere(getattr(tvm, "compile", None), "build", nest_build=True)
        for tir_name in ("tirx", "tir"):
            tir = getattr(tvm, tir_name, None)
            self.wrap_everywhere(getattr(tir, "build", None), "build", nest_build=True)

    def _install_vm_hooks(self, tvm: Any) -> None:
        vm_cls = tvm.relax.VirtualMachine
        self.wrap_stage(vm_cls, "__init__", "vm_init")
        for method in ("invoke_stateful", "time_evaluator", "set_input", "get_outputs"):
            self.wrap_stage(vm_cls, method, "run")
        original_getitem = vm_cls.__getitem__
        tracer = self

        @functools.wraps(original_getitem)
        def getitem(vm: Any, key: Any) -> Any:
            func = original_getitem(vm, key)

            def call_in_run_stage(*args: Any, **kwargs: Any) -> Any:
                tracer.enter("run")
                try:
                    result = func(*args, **kwargs)
                except BaseException as exc:
                    _stamp(exc, "run", tracer.pass_path)
                    raise
                tracer.leave("run")
                return result

            return call_in_run_stage

        vm_cls.__getitem__ = getitem
