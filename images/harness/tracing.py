"""Stage tracing by instrumenting TVM itself, so even an arbitrary script reports where it failed.

Three hooks, installed before user code runs:
- a PassInstrument in every PassContext (the default one included) that names
  each top-level pass `pass:<index>:<Name>` and records the function table and
  TVMScript after it;
- wrappers around relax.build / tvm.compile (stage `build`) and around the
  Relax VM's constructor (`vm_init`) and function lookup (`run`);
- a wrapper around Pass.__call__ that stamps a failing pass's exception with
  its stage (the instrument never hears about a pass that raised).
An exception that leaves an instrumented boundary carries the stage it was
raised in (attribute STAGE_ATTR), so the top level can tell a `vm_init`
failure from one in the user's own Python.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from typing import Any

from .events import EventSink

STAGE_ATTR = "_tvmrepro_stage"
IR_CAP_CHARS = 512 * 1024
_TRANSPARENT_PASSES = {"sequential", "Sequential"}


def stage_of(exc: BaseException) -> str | None:
    """The stage stamped on this exception or on one it was raised from."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        stage = getattr(current, STAGE_ATTR, None)
        if stage:
            return str(stage)
        current = current.__cause__ or current.__context__
    return None


def _stamp(exc: BaseException, stage: str) -> None:
    if getattr(exc, STAGE_ATTR, None) is None:
        # Some C-level exceptions take no attributes; the stage event still names the stage.
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, STAGE_ATTR, stage)


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
        self.depth = 0
        self.build_depth = 0
        self._pass_started = 0.0

    def enter(self, stage: str) -> None:
        """Move to a stage and tell the runtime at once (a crash may follow)."""
        if stage != self.stage:
            self.stage = stage
            self.sink.emit("stage", stage=stage)

    def leave(self, finished: str) -> None:
        """Back from an instrumented call: to the idle stage, or stay at `finished` in module mode."""
        self.enter(self.idle_stage or finished)

    # -- the PassInstrument callbacks ------------------------------------------------
    def before_pass(self, mod: Any, info: Any) -> None:
        """Called by TVM before every pass."""
        if info.name in _TRANSPARENT_PASSES:
            return
        self.depth += 1
        if self.depth == 1 and self.build_depth == 0:
            self.enter(f"pass:{self.pass_count}:{info.name}")
            self._pass_started = time.perf_counter()

    def after_pass(self, mod: Any, info: Any) -> None:
        """Called by TVM after every pass that returned."""
        if info.name in _TRANSPARENT_PASSES:
            return
        self.depth -= 1
        if self.depth == 0 and self.build_depth == 0:
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
        """Hook the PassContext, Pass.__call__, relax.build, tvm.compile and the Relax VM."""
        self._install_pass_hooks(tvm)
        self._install_build_hooks(tvm)
        self._install_vm_hooks(tvm)

    def _install_pass_hooks(self, tvm: Any) -> None:
        tracer = self

        @tvm.ir.instrument.pass_instrument
        class StageInstrument:
            def run_before_pass(self, mod: Any, info: Any) -> None:
                tracer.before_pass(mod, info)

            def run_after_pass(self, mod: Any, info: Any) -> None:
                tracer.after_pass(mod, info)

        instrument = StageInstrument()
        context_cls = tvm.transform.PassContext
        original_init = context_cls.__init__

        init_signature = inspect.signature(original_init)

        @functools.wraps(original_init)
        def init_with_instrument(ctx: Any, *args: Any, **kwargs: Any) -> None:
            bound = init_signature.bind(ctx, *args, **kwargs)
            instruments = list(bound.arguments.get("instruments") or [])
            if instrument not in instruments:
                instruments.append(instrument)
            bound.arguments["instruments"] = instruments
            original_init(*bound.args, **bound.kwargs)

        context_cls.__init__ = init_with_instrument
        # Passes run outside any `with PassContext` use the current default one: replace it.
        context_cls(opt_level=2).__enter__()

        pass_cls = tvm.ir.transform.Pass
        original_call = pass_cls.__call__

        @functools.wraps(original_call)
        def call_stamping_stage(pass_obj: Any, mod: Any) -> Any:
            depth, build_depth = tracer.depth, tracer.build_depth
            try:
                return original_call(pass_obj, mod)
            except BaseException as exc:
                _stamp(exc, tracer.stage)
                tracer.depth, tracer.build_depth = depth, build_depth
                raise

        pass_cls.__call__ = call_stamping_stage

    def _wrap_stage(self, owner: Any, name: str, stage: str, nest_build: bool = False) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        tracer = self

        @functools.wraps(original)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            nested = nest_build and tracer.build_depth > 0
            if not nested:
                tracer.enter(stage)
            tracer.build_depth += 1 if nest_build else 0
            try:
                result = original(*args, **kwargs)
            except BaseException as exc:
                _stamp(exc, tracer.stage)
                raise
            finally:
                tracer.build_depth -= 1 if nest_build else 0
            if not nested:
                tracer.leave(stage)
            return result

        setattr(owner, name, wrapped)

    def _install_build_hooks(self, tvm: Any) -> None:
        self._wrap_stage(tvm.relax, "build", "build", nest_build=True)
        self._wrap_stage(tvm, "compile", "build", nest_build=True)

    def _install_vm_hooks(self, tvm: Any) -> None:
        vm_cls = tvm.relax.VirtualMachine
        self._wrap_stage(vm_cls, "__init__", "vm_init")
        for method in ("invoke_stateful", "time_evaluator", "set_input", "get_outputs"):
            self._wrap_stage(vm_cls, method, "run")
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
                    _stamp(exc, "run")
                    raise
                tracer.leave("run")
                return result

            return call_in_run_stage

        vm_cls.__getitem__ = getitem
