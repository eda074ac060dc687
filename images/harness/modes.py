"""The two ways a case runs: module mode (TVMScript + passes + build + VM) and script mode."""

from __future__ import annotations

import runpy
import time
from pathlib import Path
from typing import Any

from .inputs import make_inputs, summarize, var_name
from .porting import Features, Incompatible, port_target
from .reproducer import entry_reproducer, module_reproducer
from .tracing import Tracer

# Targets whose code runs on the host CPU; any other target kind names its device.
_DEVICE_OF_TARGET = {"llvm": "cpu", "c": "cpu"}
# A relax_pipeline that names relax.get_default_pipeline(target) (extract.py records it).
TARGET_DEFAULT = "target_default"
# The file a module-mode run writes its module to and runs (run as a module of the same name).
RUN_FILE = "case_module.py"


def run_source(path: Path, source: str, run_name: str) -> dict[str, Any]:
    """Execute ported source as a real file, so TVMScript and tracebacks can read its lines."""
    path.write_text(source)
    return runpy.run_path(str(path), run_name=run_name)


def resolve_pass(tvm: Any, spec: dict[str, Any]) -> Any:
    """Instantiate a pass by name from relax.transform, then tirx/tir.transform."""
    name, args = spec["name"], spec.get("args") or {}
    namespaces = [tvm.relax.transform]
    for tir_name in ("tirx", "tir"):
        tir = getattr(tvm, tir_name, None)
        if tir is not None:
            namespaces.append(tir.transform)
    for namespace in namespaces:
        factory = getattr(namespace, name, None)
        if callable(factory):
            return factory(**args)
    raise Incompatible(f"pass {name} does not exist in TVM {tvm.__version__}")


def build_options(tvm: Any, case: dict[str, Any], target: Any) -> dict[str, Any]:
    """relax.build's options that the case sets otherwise than relax.build's defaults (the
    relax_pipeline TARGET_DEFAULT: relax.get_default_pipeline of the build's target)."""
    defaults = {"exec_mode": "bytecode", "relax_pipeline": "default", "tir_pipeline": "default"}
    options = {key: case[key] for key, value in defaults.items()
               if key in case and case[key] != value}
    if options.get("relax_pipeline") == TARGET_DEFAULT:
        options["relax_pipeline"] = tvm.relax.get_default_pipeline(target)
    return options


def module_json_prelude(case: dict[str, Any]) -> str:
    """What defines MODULE_JSON (the module as save_json wrote it) before a case's source reads
    it; "" for a case without one."""
    if case.get("module_json") is None:
        return ""
    return f"MODULE_JSON = {case['module_json']!r}\n"


def run_module_case(tvm: Any, case: dict[str, Any], variant: dict[str, Any], tracer: Tracer,
                    workdir: Path, source: str, features: Features,
                    parsed: tuple[str, Any] | None = None) -> dict[str, Any]:
    """Parse the module, apply the variant's passes one by one, build, create the VM, call entry.

    `parsed`: a text and the namespace it defined run as this run's file (a reduction's
    candidate, parsed by its check): where it is this run's text, it is not parsed again."""
    source = module_json_prelude(case) + source
    target_spec = port_target(case["target"], features)
    target = tvm.target.Target(target_spec)
    device_kind = _DEVICE_OF_TARGET.get(target.kind.name, target.kind.name)
    # Sent before anything runs: a run that crashes still has its standalone reproducer.
    reproducer = module_reproducer(tvm, case, variant, source, target_spec, device_kind)
    tracer.sink.emit("reproducer", text=reproducer)
    tracer.enter("parse")
    if parsed is not None and parsed[0] == source:
        namespace = parsed[1]
    else:
        namespace = run_source(workdir / RUN_FILE, source, Path(RUN_FILE).stem)
    mod = namespace.get(case["module"])
    if mod is None or not isinstance(mod, tvm.IRModule):
        raise NameError(f"the source defines no IRModule named {case['module']!r}")

    config = case.get("pass_config") or {}
    with tvm.transform.PassContext(opt_level=case["opt_level"], config=config):
        for index, spec in enumerate(variant["passes"]):
            tracer.enter(f"pass:{index}:{spec['name']}")
            mod = resolve_pass(tvm, spec)(mod)
        executable = tvm.relax.build(mod, target=target, **build_options(tvm, case, target))

    device = tvm.device(device_kind, 0)
    vm = tvm.relax.VirtualMachine(executable, device)
    if not case.get("entry"):
        return {"outputs": None}
    entry = case["entry"]
    func = mod[entry] if entry in [g.name_hint for g in mod.get_global_vars()] else None
    if func is None:
        raise NameError(f"entry function {entry!r} is not in the module after the passes")
    tracer.sink.emit("reproducer", text=reproducer + entry_reproducer(tvm, case, func))
    inputs = case.get("inputs") or {}
    args = (loaded_inputs(tvm, func, device, inputs["files"]) if inputs.get("files") else
            make_inputs(tvm, func, device, inputs.get("seed", 0), inputs.get("shape_vars") or {}))
    started = time.perf_counter()
    output = vm[entry](*args)
    elapsed = time.perf_counter() - started
    found = {"outputs": summarize(output), "run_seconds": round(elapsed, 6)}
    if case.get("reference"):
        found["reference_outputs"] = numpy_reference(case["reference"], func, args)
    return found


def numpy_reference(expression: str, func: Any, args: list[Any]) -> Any:
    """The case's NumPy expression of the entry's inputs (by parameter name), summarized.

    Evaluated after the call, on the same inputs: what the entry should have computed.
    """
    import numpy as np

    names = {var_name(param): arg.numpy() for param, arg in zip(func.params, args, strict=True)}
    # One namespace (comprehensions see the inputs); it runs in the sandbox like the case.
    expected = eval(expression, {"np": np, "numpy": np, **names})  # noqa: S307
    if isinstance(expected, list | tuple):  # a tuple's items, as TVM's outputs are summarized
        return [summarize(_AsNumpy(np.asarray(item))) for item in expected]
    return summarize(_AsNumpy(np.asarray(expected)))


def loaded_inputs(tvm: Any, func: Any, device: Any, files: list[str]) -> list[Any]:
    """The entry's inputs from the case's .npy files (in the work directory), one a parameter
    in order: the inputs a script gave its VM, carried by its extracted case."""
    import numpy as np

    if len(files) != len(func.params):
        raise TypeError(f"{len(files)} input files for {len(func.params)} parameters of the entry")
    to_tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    return [to_tensor(np.load(name, allow_pickle=False), device) for name in files]


class _AsNumpy:
    """A numpy array shown to `summarize` like a TVM tensor."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def numpy(self) -> Any:
        """The array itself."""
        return self.array


def run_script_case(script: str, workdir: Path) -> dict[str, Any]:
    """Run the (ported) script as __main__; instrumentation reports the stages."""
    run_source(workdir / "repro.py", script, "__main__")
    return {"outputs": None}
