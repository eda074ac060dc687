"""A standalone reproducer: the case as a plain Python script for this very TVM release.

A maintainer should not need tvm-repro to see the bug: the report gives, per
failing environment, `pip install` of its pins and this script, which does what
the harness did (the ported module, the passes by their full names in this
release's namespaces, the build, the VM, the entry call with the same seeded
inputs) and nothing else.
"""

from __future__ import annotations

from typing import Any

from .inputs import dim_value, param_type


def pass_expression(tvm: Any, spec: dict[str, Any]) -> str:
    """`tvm.relax.transform.Name(arg=...)` for a pass spec, in this release's namespace."""
    name, args = spec["name"], spec.get("args") or {}
    for namespace in ("relax", "tirx", "tir"):
        module = getattr(tvm, namespace, None)
        if module is not None and callable(getattr(module.transform, name, None)):
            arguments = ", ".join(f"{key}={value!r}" for key, value in args.items())
            return f"tvm.{namespace}.transform.{name}({arguments})"
    return f"tvm.relax.transform.{name}()  # not in this release"


def _input_lines(func: Any, shape_vars: dict[str, int]) -> list[str]:
    """numpy expressions drawing the same inputs as inputs.make_inputs, in the same order."""
    lines = []
    for param in func.params:
        info = param_type(param)
        shape = tuple(dim_value(d, shape_vars) for d in info.shape)
        dtype = str(info.dtype)
        if dtype.startswith("float") or dtype.startswith("bfloat"):
            draw = f"rng.standard_normal({shape!r}).astype({dtype!r})"
        elif dtype == "bool":
            draw = f"rng.randint(0, 2, {shape!r}).astype(bool)"
        else:
            draw = f"rng.randint(0, 10, {shape!r}).astype({dtype!r})"
        lines.append(f"    to_tensor({draw}, device),")
    return lines


def module_reproducer(tvm: Any, case: dict[str, Any], variant: dict[str, Any], source: str,
                      target: Any, device: str) -> str:
    """The script up to the VM's creation (source already ported to this release)."""
    lines = [f"# {case.get('title') or 'tvm-repro case'}: variant {variant['name']!r}, "
             f"apache-tvm {tvm.__version__}", source.rstrip(), "", "",
             "# What tvm-repro ran: the passes one by one, the build, the VM.",
             "import tvm", "from tvm import relax", "",
             f"mod = {case['module']}"]
    config = case.get("pass_config") or {}
    context = f"opt_level={case['opt_level']}" + (f", config={config!r}" if config else "")
    lines += [f"with tvm.transform.PassContext({context}):"]
    lines += [f"    mod = {pass_expression(tvm, spec)}(mod)" for spec in variant["passes"]]
    defaults = {"exec_mode": "bytecode", "relax_pipeline": "default", "tir_pipeline": "default"}
    options = "".join(f", {key}={case[key]!r}" for key, value in defaults.items()
                      if key in case and case[key] != value)
    made = f"relax_pipeline=relax.get_default_pipeline(tvm.target.Target({target!r}))"
    options = options.replace("relax_pipeline='target_default'", made)
    lines += [f"    executable = relax.build(mod, target=tvm.target.Target({target!r}){options})",
              f"device = tvm.device({device!r}, 0)",
              "vm = relax.VirtualMachine(executable, device)",
              'print("built; the VM was created")']
    return "\n".join(lines) + "\n"


def entry_reproducer(tvm: Any, case: dict[str, Any], func: Any) -> str:
    """The call of the entry function with the harness's seeded inputs (after module_reproducer)."""
    inputs = case.get("inputs") or {}
    to_tensor = "tvm.runtime.tensor" if hasattr(tvm.runtime, "tensor") else "tvm.nd.array"
    lines = ["", "import numpy as np", "",
             f"rng = np.random.RandomState({inputs.get('seed', 0)})",
             f"to_tensor = {to_tensor}", "args = ["]
    lines += _input_lines(func, inputs.get("shape_vars") or {})
    lines += ["]", f"output = vm[{case['entry']!r}](*args)", "print(output)"]
    return "\n".join(lines) + "\n"
