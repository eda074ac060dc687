"""Extraction: record every top-level TVM step of a script, with the module that entered it.

In extract mode (case["harness"]["mode"] == "extract") the script runs exactly
as in script mode, and for every top-level pass and every build this module
emits an `extract_step` event as the step starts: its kind and name, the pass's
arguments where its factory call exposed them, the build's target and the
PassContext's opt_level, the module that entered it (TVMScript), and `link`:
the index of the earlier pass whose output this module is (the chain of
passes that produced it). The events are written before the step runs, so a
step that crashes the process is still known. When a pass raises, an
`extract_inner` event names the innermost pass that was running (inside a
pipeline or a build, say FoldConstant) with its module, where a case can name
that pass, and `extract_child` events name the passes run directly inside each
top-level one (a pipeline's own passes), so that a pipeline a case cannot name
can be spelled out as them. In a frontend script the chain starts at the module an importer
returned (`imported_by`; the passes the importer runs itself are its own), and a build given
relax.get_default_pipeline(target) names it TARGET_DEFAULT. The worker turns all this into a
module-mode case (worker/extraction.py).
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from .events import EventSink
from .references import References
from .scriptsrc import module_fields, module_source
from .tracing import Tracer, replace_everywhere

MODE = "extract"
# A build's relax_pipeline that relax.get_default_pipeline(target) made (modes.py makes it so).
TARGET_DEFAULT = "target_default"
_TRANSPARENT = {"sequential", "Sequential"}


def _json_args(bound: inspect.BoundArguments) -> tuple[dict[str, Any], list[str]]:
    """The explicitly given arguments that JSON can carry, and the names of those it cannot."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in bound.arguments.items():
        try:
            if json.loads(json.dumps(value)) != value:
                raise TypeError(name)
        except (TypeError, ValueError):
            dropped.append(name)
            continue
        kept[name] = value
    return kept, dropped


def _target_text(target: Any) -> str | None:
    """A target as a case names it: the string given, else the kind when nothing else is set."""
    if target is None or isinstance(target, str):
        return target
    text = str(target)
    try:
        data = json.loads(text)
    except ValueError:
        return text
    # Only defaults besides the kind (the host triple, the keys): the plain kind says it all.
    if isinstance(data, dict) and set(data) <= {"kind", "tag", "keys", "mtriple", "host"}:
        return str(data.get("kind"))
    return text


class Recorder:
    """Emits an extract_step event for each top-level pass and build, before it runs."""

    def __init__(self, tvm: Any, tracer: Tracer, sink: EventSink, workdir: Path,
                 references: References | None = None) -> None:
        self.tvm = tvm
        self.references = references
        self.imported: list[tuple[str, Any]] = []  # each importer's module, as it returned
        self.default_pipelines: list[Any] = []  # what relax.get_default_pipeline made
        self.workdir = workdir
        self.tracer = tracer
        self.sink = sink
        self.count = 0
        self.build_depth = 0
        self.pass_specs: dict[str, dict[str, Any]] = {}  # pass info name -> factory and args
        self.factories: set[str] = set()  # names of the pass factories a case can use
        self.last_output: Any = None
        self.last_output_step: int | None = None
        self.open: list[tuple[str, Any]] = []  # passes started and not finished, outermost first
        self.reported: set[int] = set()  # exceptions whose innermost pass was reported
        self.modules: list[tuple[int | str, Any]] = []  # each recorded step's module

    def finish(self) -> None:
        """After the script: whether each recorded module is well formed and parses back, as an
        `extract_module` event (with its save_json text where it does not parse back). Done
        here, not as the step starts: parsing inside a pass's instrument is not safe."""
        for index, mod in self.modules:
            self.sink.emit("extract_module", index=index,
                           **module_fields(self.tvm, mod, self.workdir))

    def install(self) -> None:
        """Hook the tracer's pass callbacks, the pass factories, the builds and the
        importers' returns."""
        if self.references is not None:
            self.references.on_import.append(self._on_import)
        self._hook_tracer()
        self._wrap_factories()
        self._wrap_pass_call()
        builds = [(self.tvm.relax, "build"), (self.tvm, "compile")]
        builds += [(getattr(self.tvm, n), "build") for n in ("tirx", "tir") if hasattr(self.tvm, n)]
        for owner, name in builds:
            self._wrap_build(owner, name)
        self._wrap_default_pipeline()

    def _on_import(self, importer: str, mod: Any) -> None:
        """An importer returned: its module starts a chain (the passes it ran are its own)."""
        self.imported.append((importer, mod))
        self.last_output, self.last_output_step = mod, None
        self.sink.emit("extract_import", importer=importer)

    def _importing(self) -> bool:
        return self.references is not None and self.references.importing > 0

    def _imported_by(self, mod: Any) -> str | None:
        """The importer whose module this very one is, if any."""
        return next((name for name, made in reversed(self.imported) if made.same_as(mod)), None)

    def _link(self, mod: Any) -> int | None:
        last = self.last_output
        return self.last_output_step if last is not None and mod.same_as(last) else None

    def _opt_level(self) -> int:
        return int(self.tvm.transform.PassContext.current().opt_level)

    def _emit(self, kind: str, name: str, mod: Any, **extra: Any) -> int:
        index = self.count
        self.count += 1
        self.sink.emit("extract_step", index=index, kind=kind, name=name, link=self._link(mod),
                       opt_level=self._opt_level(), config=self._config(),
                       ir=module_source(mod), defined_as=self._script_name(mod),
                       imported_by=self._imported_by(mod), **extra)
        self.modules.append((index, mod))
        return index

    def _script_name(self, mod: Any) -> list[str]:
        """The script's own top-level names for this very module (`Module` of its
        `@I.ir_module class Module`): where one is a class, its source is the script's own."""
        script = sys.modules.get("__main__")
        return [str(name) for name, value in (list(vars(script).items()) if script else [])
                if isinstance(value, self.tvm.IRModule) and value.same_as(mod)]

    def _config(self) -> dict[str, Any]:
        """The current PassContext's config, the entries JSON can carry."""
        try:
            config = dict(self.tvm.transform.PassContext.current().config)
        except Exception:  # noqa: BLE001  (a release without a readable config: none)
            return {}
        found: dict[str, Any] = {}
        for key, value in config.items():
            plain = value.value if hasattr(value, "value") else value
            if isinstance(plain, str | int | float | bool):
                found[str(key)] = type(plain)(plain)
        return found

    def _hook_tracer(self) -> None:
        tracer, before, after = self.tracer, self.tracer.before_pass, self.tracer.after_pass
        current: list[int] = []

        def top_level(info: Any) -> bool:
            return (info.name not in _TRANSPARENT and tracer.depth == 0
                    and tracer.build_depth == 0 and not self._importing())

        def before_pass(mod: Any, info: Any) -> None:
            if info.name not in _TRANSPARENT:
                if tracer.depth == 0:  # a new top-level pass: what was left open has ended
                    self.open.clear()
                self.open.append((info.name, mod))
            if top_level(info):
                spec = self.pass_specs.get(info.name, {"name": info.name, "args": {}})
                current[:] = [self._emit("pass", spec["name"], mod, args=spec["args"],
                                         dropped_args=spec.get("dropped", []),
                                         resolvable=self._factory_name(info.name) is not None)]
            elif (info.name not in _TRANSPARENT and tracer.depth == 1
                  and tracer.build_depth == 0 and current and not self._importing()):
                self._emit_child(current[0], info.name)
            before(mod, info)

        def after_pass(mod: Any, info: Any) -> None:
            after(mod, info)
            if info.name not in _TRANSPARENT and self.open:
                self.open.pop()
            if top_level(info) and current:
                self.last_output, self.last_output_step = mod, current[0]

        tracer.before_pass = before_pass  # type: ignore[method-assign]
        tracer.after_pass = after_pass  # type: ignore[method-assign]

    def _emit_child(self, parent: int, pass_name: str) -> None:
        """A pass run directly inside a top-level one (a pipeline's own passes), without its
        module: the worker can spell a pipeline out as these when a case cannot name it."""
        name = self._factory_name(pass_name)
        spec = self.pass_specs.get(pass_name, {"args": {}})
        self.sink.emit("extract_child", parent=parent, name=name or pass_name,
                       resolvable=name is not None, args=spec["args"],
                       dropped_args=spec.get("dropped", []))

    def _wrap_pass_call(self) -> None:
        """On a pass's exception, report the innermost pass that was running, with its module."""
        pass_cls = self.tvm.ir.transform.Pass
        original_call = pass_cls.__call__

        @functools.wraps(original_call)
        def call(pass_obj: Any, mod: Any) -> Any:
            try:
                return original_call(pass_obj, mod)
            except BaseException as exc:
                if id(exc) not in self.reported:
                    self.reported.add(id(exc))
                    self._report_innermost()
                raise

        pass_cls.__call__ = call

    def _report_innermost(self) -> None:
        known = [(name, mod) for name, mod in self.open if self._factory_name(name)]
        if not known:
            return
        name, mod = known[-1]
        spec = self.pass_specs.get(name, {"name": self._factory_name(name), "args": {}})
        self.sink.emit("extract_inner", kind="pass", name=spec["name"], args=spec["args"],
                       dropped_args=spec.get("dropped", []), opt_level=self._opt_level(),
                       depth=len(self.open), config=self._config(), ir=module_source(mod))
        self.modules.append(("inner", mod))

    def _factory_name(self, pass_name: str) -> str | None:
        """The transform function that makes a pass of this name, if the case can name it."""
        spec = self.pass_specs.get(pass_name)
        if spec:
            return str(spec["name"])
        return pass_name if pass_name in self.factories else None

    def _wrap_factories(self) -> None:
        namespaces = [self.tvm.relax.transform]
        namespaces += [getattr(self.tvm, n).transform for n in ("tirx", "tir") if hasattr(self.tvm, n)]
        for namespace in namespaces:
            for name, factory in list(vars(namespace).items()):
                if inspect.isfunction(factory) and name[:1].isupper():
                    self.factories.add(name)
                    setattr(namespace, name, self._recording_factory(name, factory))

    def _recording_factory(self, name: str, factory: Any) -> Any:
        signature = inspect.signature(factory)
        pass_cls = self.tvm.ir.transform.Pass

        @functools.wraps(factory)
        def make(*args: Any, **kwargs: Any) -> Any:
            made = factory(*args, **kwargs)
            if isinstance(made, pass_cls):
                try:
                    kept, dropped = _json_args(signature.bind(*args, **kwargs))
                except TypeError:
                    kept, dropped = {}, ["*"]
                self.pass_specs[made.info.name] = {"name": name, "args": kept, "dropped": dropped}
            return made

        return make

    def _as_module(self, mod: Any) -> Any:
        """The module a build takes: an IRModule, or a PrimFunc made one as tvm.compile and
        tirx.build make it (`IRModule.from_expr`); None for anything else."""
        if isinstance(mod, self.tvm.IRModule):
            return mod
        prim_funcs = tuple(getattr(self.tvm, n).PrimFunc for n in ("tirx", "tir")
                           if hasattr(getattr(self.tvm, n, None), "PrimFunc"))
        if prim_funcs and isinstance(mod, prim_funcs):
            return self.tvm.IRModule.from_expr(mod)
        return None

    def _wrap_default_pipeline(self) -> None:
        """Remember each pipeline relax.get_default_pipeline makes: a build given one names it
        TARGET_DEFAULT, which a case can carry (the build's target makes it again)."""
        original = getattr(self.tvm.relax, "get_default_pipeline", None)
        if original is None:
            return

        @functools.wraps(original)
        def make(*args: Any, **kwargs: Any) -> Any:
            made = original(*args, **kwargs)
            self.default_pipelines.append(made)
            return made

        replace_everywhere(original, make)

    def _named_pipeline(self, value: Any) -> str | None:
        return TARGET_DEFAULT if any(value is p or value.same_as(p)
                                     for p in self.default_pipelines) else None

    def _wrap_build(self, owner: Any, name: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        signature = inspect.signature(original)

        @functools.wraps(original)
        def build(*args: Any, **kwargs: Any) -> Any:
            if self.build_depth == 0:
                bound = signature.bind_partial(*args, **kwargs).arguments
                mod = self._as_module(bound.get("mod", args[0] if args else None))
                if mod is not None:
                    self._emit("build", name, mod, target=_target_text(bound.get("target")),
                               options=_build_options(bound, self._named_pipeline))
            self.build_depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self.build_depth -= 1

        setattr(owner, name, build)


def _build_options(bound: dict[str, Any], named: Any) -> dict[str, Any]:
    """The build's options as the script gave them: exec_mode, and each pipeline as its name
    or None (a Pass object as the name `named` gives it: TARGET_DEFAULT for the one
    relax.get_default_pipeline made; else it is named under `unnamed`)."""
    options: dict[str, Any] = {}
    if "exec_mode" in bound:
        options["exec_mode"] = str(bound["exec_mode"])
    for key, given in (("relax_pipeline", "relax_pipeline"), ("tir_pipeline", "tir_pipeline"),
                       ("tir_pipeline", "pipeline")):  # tirx.build names its TIR one `pipeline`
        if given in bound:
            value = bound[given]
            if value is None or isinstance(value, str):
                options[key] = value
            elif key == "relax_pipeline" and named(value) is not None:
                options[key] = named(value)
            else:
                options.setdefault("unnamed", []).append(key)
    return options


def record_steps(tvm: Any, tracer: Tracer, sink: EventSink, workdir: Path,
                 references: References | None = None) -> Recorder:
    """Install the recorder (extract mode only), after the tracer's own hooks (and the
    importers' of references.py: a frontend script's chain starts at the imported module)."""
    recorder = Recorder(tvm, tracer, sink, workdir, references)
    recorder.install()
    return recorder
