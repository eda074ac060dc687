"""The paths of a layer verdict: a script run with the optional passes of its pipelines cut.

A script's Relax passes (those it applies itself and those of the pipeline its build runs)
are of two kinds: the lowering a module needs to build and run at all (LOWERING: legalizing
its operators, leaving dataflow, making calls and allocations explicit, the VM's shape
code), and the optimisations. A path keeps the first `keep` optimisations it meets, in the
order they run, and skips every later one, lowering alone after them: `keep` 0 builds the
module as the script made it (the imported one) with nothing but its lowering; no `keep`
skips nothing (the script as written) and reports the optimisations it ran, which are the
cut points of the other paths. Passes nested in a lowering pass are part of it, and the
VM's code generation (the VM's codegen and link, TIR's own pipeline inside tirx.build) is
never cut: it is the `codegen` layer. The PassContext is the script's (its opt level and
config) on every path: no Relax pass of these releases reads the opt level, TIR's codegen
does, so cutting it too would change the codegen layer between paths.

A pass that a script can name (a factory of relax.transform, relax.backend or TIR's
transforms) is one cut point with the passes it runs itself (FuseTIR runs FuseTIRInner and its
clean-ups); one that cannot be named and runs passes is a pipeline (`_pipeline`), not an
optimisation of its own: the listing path names those (`containers`) and the cut paths count
only the others. Events, as they happen (a crash loses no more than the pass it was in):
`layer_pass` (a pass starts: optional), `layer_container` (a pass turned out to be a pipeline),
`layer_kept` (it returned: optional, container), `layer_skip` (the cut skipped it) and
`layer_codegen` (code generation began).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from .events import EventSink
from .tracing import add_to_every_context, replace_everywhere

# What a module needs to build and run: never cut. DispatchSortScan and DispatchSampling
# lower the operators LegalizeOps leaves to them; BindParams, BindSymbolicVars and the
# parameter passes change the entry's signature the script calls; DecomposeOpsFor* choose
# the operators' semantics (inference or training); on a GPU target a PrimFunc without thread
# bindings does not build, so the default schedules are lowering there.
LOWERING = frozenset({
    "LegalizeOps", "DispatchSortScan", "DispatchSampling", "ToNonDataflow",
    "RemovePurityChecking", "CallTIRRewrite", "LowerAllocTensor", "LowerRuntimeBuiltin",
    "VMBuiltinLower", "ComputePrimValue", "VMShapeLower", "AttachGlobalSymbol", "BindParams",
    "BindSymbolicVars", "LiftTransformParams", "BundleModelParams",
    "DecomposeOpsForInference", "DecomposeOpsForTraining", "Normalize", "NormalizeGlobalVar",
    "ApplyDefaultSchedule", "DefaultGPUSchedule", "s_tir.DefaultGPUSchedule",
})
TRANSPARENT = frozenset({"sequential", "Sequential"})
# relax.vm_build's steps after the pipeline, and TIR's builds: the code generation.
CODEGEN_STEPS = ("_vmcodegen", "_vmlink")


class Cut:
    """Decides, pass by pass, what a path runs, and reports what it ran."""

    def __init__(self, tvm: Any, sink: EventSink, keep: int | None,
                 containers: set[str]) -> None:
        self.tvm, self.sink, self.keep = tvm, sink, keep
        self.containers = set(containers)
        # The passes running now, outermost first: [name, nested in a pass that is a unit].
        self.stack: list[list[Any]] = []
        self.codegen = 0  # code generation steps running now
        self.optional_met = 0
        self._named: dict[str, bool] = {}

    def _ignored(self, name: str) -> bool:
        """A Sequential (it is its passes), or a pass of the code generation."""
        return name in TRANSPARENT or self.codegen > 0

    def unit(self, name: str) -> bool:
        """A pass whose nested passes are its own (a lowering pass, or one a script can name:
        FuseTIR runs FuseTIRInner and its clean-ups), unlike a pipeline such as `_pipeline`."""
        if name in LOWERING:
            return True
        if name not in self._named:
            spaces = [getattr(self.tvm.relax, "transform", None),
                      getattr(self.tvm.relax, "backend", None)]
            spaces += [getattr(getattr(self.tvm, tir, None), "transform", None)
                       for tir in ("tirx", "tir", "s_tir")]
            self._named[name] = any(callable(getattr(space, name, None)) for space in spaces)
        return self._named[name]

    def _inside(self) -> bool:
        """Whether a pass starting now is nested in a unit (it is that pass's own)."""
        return bool(self.stack) and (self.stack[-1][1] or self.unit(self.stack[-1][0]))

    def should_run(self, mod: Any, info: Any) -> bool:
        """TVM asks before each pass: a path past its `keep` optimisations skips the rest."""
        name = str(info.name)
        if (self.keep is None or self._ignored(name) or self._inside() or name in LOWERING
                or name in self.containers):
            return True
        self.optional_met += 1
        if self.optional_met <= self.keep:
            return True
        self.sink.emit("layer_skip", name=name)
        return False

    def before(self, mod: Any, info: Any) -> None:
        """A pass starts (it was not skipped)."""
        name = str(info.name)
        if self._ignored(name):
            return
        inside = self._inside()
        parent = self.stack[-1][0] if self.stack else None
        if parent is not None and not inside and parent not in self.containers:
            self.containers.add(parent)  # said now: a path that crashes in it still knows
            self.sink.emit("layer_container", name=parent)
        self.stack.append([name, inside])
        if not inside:
            self.sink.emit("layer_pass", name=name, optional=name not in LOWERING)

    def after(self, mod: Any, info: Any) -> None:
        """A pass returned."""
        if self._ignored(str(info.name)) or not self.stack:
            return
        name, inside = self.stack.pop()
        if inside:
            return
        container = name in self.containers
        self.sink.emit("layer_kept", name=name, container=container,
                       optional=not container and name not in LOWERING)

    def unwound(self, depth: int) -> None:
        """A pass raised through: the passes it was running are over (a script may go on)."""
        del self.stack[depth:]

    def codegen_step(self, original: Any) -> Any:
        """`original` (a code generation step), during which no pass is the cut's."""
        cut = self

        @functools.wraps(original)
        def step(*args: Any, **kwargs: Any) -> Any:
            if cut.codegen == 0:
                cut.sink.emit("layer_codegen")
            cut.codegen += 1
            try:
                return original(*args, **kwargs)
            finally:
                cut.codegen -= 1

        return step


def _instrument(tvm: Any, cut: Cut) -> Any:
    @tvm.ir.instrument.pass_instrument
    class CutInstrument:
        def should_run(self, mod: Any, info: Any) -> bool:
            return cut.should_run(mod, info)

        def run_before_pass(self, mod: Any, info: Any) -> None:
            cut.before(mod, info)

        def run_after_pass(self, mod: Any, info: Any) -> None:
            cut.after(mod, info)

    return CutInstrument()


def _unwind_on_raise(tvm: Any, cut: Cut) -> None:
    """A pass that raises gets no after-pass call: drop it (and what it ran) from the stack."""
    pass_cls = tvm.ir.transform.Pass
    original_call = pass_cls.__call__

    @functools.wraps(original_call)
    def call(pass_obj: Any, mod: Any) -> Any:
        depth = len(cut.stack)
        try:
            return original_call(pass_obj, mod)
        except BaseException:
            cut.unwound(depth)
            raise

    pass_cls.__call__ = call


def _hook_codegen(tvm: Any, cut: Cut) -> None:
    vm_build = getattr(tvm.relax, "vm_build", None)
    for name in CODEGEN_STEPS:
        original = getattr(vm_build, name, None)
        if callable(original):
            setattr(vm_build, name, cut.codegen_step(original))
    for tir_name in ("tirx", "tir"):
        build = getattr(getattr(tvm, tir_name, None), "build", None)
        if callable(build):
            replace_everywhere(build, cut.codegen_step(build))


def install(tvm: Any, sink: EventSink, options: dict[str, Any]) -> Cut:
    """Cut this run's passes as `options` say ({"keep": k, "containers": [...]}; none: the
    listing path, which cuts nothing)."""
    keep = options.get("keep")
    cut = Cut(tvm, sink, keep if isinstance(keep, int) else None,
              {str(name) for name in options.get("containers") or []})
    add_to_every_context(tvm, _instrument(tvm, cut))
    _unwind_on_raise(tvm, cut)
    with contextlib.suppress(AttributeError):
        _hook_codegen(tvm, cut)
    return cut
