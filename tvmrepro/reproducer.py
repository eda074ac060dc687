"""The standalone script a report shows for one variant on one release, built here from the case.

A run sends a reproducer of its own, but a run can say anything: the report never shows it.
This script is made from the case as it was submitted, ported with the porting rules that the
run says it applied (only rules the harness knows, applied by the same code, in the same order),
and from text of this module: the passes looked up by name in the release's namespaces, the
build, the VM, and the entry called with inputs drawn, as the harness draws them, from the
entry's signature with the case's seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from images.harness.porting import RULES, Features, port, target_dict
from tvmrepro.cases import SCRIPT_VARIANT
from tvmrepro.escaping import visible_line

_RULES = {rule.name: rule for rule in RULES}
_DEVICE_OF_TARGET = {"llvm": "cpu", "c": "cpu"}

_TRANSFORM = '''
def transform(name, **args):
    """The pass `name` of this release (tvm.relax, tvm.tirx or tvm.tir)."""
    for namespace in ("relax", "tirx", "tir"):
        factory = getattr(getattr(getattr(tvm, namespace, None), "transform", None), name, None)
        if callable(factory):
            return factory(**args)
    raise AttributeError(f"no pass {name} in TVM {tvm.__version__}")
'''

_INPUTS = '''
import numpy as np

rng = np.random.RandomState(seed)
to_tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
args = []
for param in mod[entry].params:  # one seeded tensor per parameter, as tvm-repro draws them
    info = getattr(param, "ty", None) or getattr(param, "struct_info", None)
    shape = tuple(d.value if isinstance(getattr(d, "value", None), int)
                  else shape_vars.get(str(d), 4) for d in info.shape)
    dtype = str(info.dtype)
    if dtype.startswith("float") or dtype.startswith("bfloat"):
        array = rng.standard_normal(shape).astype(dtype)
    elif dtype == "bool":
        array = rng.randint(0, 2, shape).astype(bool)
    else:
        array = rng.randint(0, 10, shape).astype(dtype)
    args.append(to_tensor(array, device))
output = vm[entry](*args)
print(output)
'''


def known_rewrites(rewrites: list[str] | None) -> list[str]:
    """The names among `rewrites` that are porting rules (a run may list anything)."""
    return [name for name in rewrites or [] if isinstance(name, str) and name in _RULES]


def ported(text: str, rewrites: list[str] | None) -> str:
    """`text` with the named porting rules applied in the harness's order (the rules a run
    applied are exactly those that changed its text, so this gives the text it ran)."""
    named = set(known_rewrites(rewrites))
    always = tuple(dataclasses.replace(rule, needed=lambda _features: True)
                   for rule in RULES if rule.name in named)
    return port(text, Features(), always)[0]


def _target_lines(target: str) -> list[str]:
    lines = [f"target_text = {target!r}"]
    try:
        as_dict = target_dict(target) if " -" in target else None
    except ValueError:
        as_dict = None
    if as_dict is None:
        return lines + ["target = tvm.target.Target(target_text)"]
    return lines + ["try:", "    target = tvm.target.Target(target_text)",
                    "except Exception:  # releases that take only a dict",
                    f"    target = tvm.target.Target({as_dict!r})"]


def reproducer(case: dict[str, Any], variant: str, release: str, target: str,
               rewrites: list[str] | None) -> str:
    """The script for `variant` of `case` on the release (apache-tvm `release`), with the
    default target `target` where the case names none."""
    # One comment line: a line break in the title would start code (control characters shown).
    title = visible_line(case.get("title") or "tvm-repro case")
    head = f"# {title}: variant {visible_line(repr(variant))}, apache-tvm {visible_line(release)}"
    if case.get("script") is not None or (variant == SCRIPT_VARIANT and not case.get("source")):
        return "\n".join([head, ported(str(case.get("script") or ""), rewrites).rstrip()]) + "\n"
    spec = next((v for v in case.get("variants") or [] if v.get("name") == variant), None)
    passes: list[dict[str, Any]] = [{"name": p} if isinstance(p, str) else dict(p)
                                    for p in (spec or {}).get("passes") or []]
    target_text = str(case.get("target") or target)
    kind = target_text.split()[0] if target_text.split() else target_text
    module = str(case.get("module") or "Module")
    lines = [head, ported(str(case.get("source") or ""), rewrites).rstrip(), "", "",
             "# What tvm-repro ran: the passes one by one, the build, the VM.",
             "import tvm", "from tvm import relax", _TRANSFORM,
             *_target_lines(target_text),
             f"mod = {module if module.isidentifier() else 'Module'}",
             f"with tvm.transform.PassContext(opt_level={int(case.get('opt_level', 3))}):"]
    for pass_spec in passes:
        arguments = "".join(f", {key}={value!r}" for key, value in
                            (pass_spec.get("args") or {}).items() if str(key).isidentifier())
        lines.append(f"    mod = transform({str(pass_spec['name'])!r}{arguments})(mod)")
    lines += ["    executable = relax.build(mod, target=target)",
              f"device = tvm.device({_DEVICE_OF_TARGET.get(kind, kind)!r}, 0)",
              "vm = relax.VirtualMachine(executable, device)",
              'print("built; the VM was created")']
    if case.get("entry"):
        inputs = case.get("inputs") or {}
        lines += ["", f"entry = {str(case['entry'])!r}", f"seed = {int(inputs.get('seed', 0))}",
                  f"shape_vars = {dict(inputs.get('shape_vars') or {})!r}"]
        lines.append(_INPUTS.rstrip("\n"))
    return "\n".join(lines) + "\n"
