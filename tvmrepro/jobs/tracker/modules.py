"""A report's script as a module-mode case, where the script is only that: one `@I.ir_module`
class, passes applied to it in order, then `relax.build` for llvm (and the VM made). Module
mode builds and makes the VM itself, so a script that does anything else (calls the VM with
inputs of its own, builds for another target, loops over passes) stays a script."""

from __future__ import annotations

import ast
from typing import Any, NotRequired, TypedDict

from tvmrepro.cases import parse_python

_PASS_MODULES = ("relax.transform", "tvm.relax.transform", "tirx.transform", "tir.transform",
                 "tvm.tirx.transform", "tvm.tir.transform", "transform")
_DISPLAY = {"print", "show"}


class PassJson(TypedDict):
    """A pass of a variant, as a case's JSON names it (constant keyword arguments only)."""

    name: str
    args: NotRequired[dict[str, object]]


class NotModuleMode(Exception):
    """The script does more than a module, passes and a build."""


def _dotted(node: ast.expr) -> str:
    """`relax.transform.FuseTIR` for that attribute chain; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _is_ir_module(node: ast.ClassDef) -> bool:
    return any(
        _dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1] == "ir_module"
        for d in node.decorator_list)


def _pass_spec(call: ast.expr) -> PassJson:
    """`relax.transform.FuseTIR()` (constant keyword arguments only) as a pass of a variant."""
    if not isinstance(call, ast.Call) or call.args:
        raise NotModuleMode("a pass with positional arguments")
    module, _, name = _dotted(call.func).rpartition(".")
    if module not in _PASS_MODULES:
        raise NotModuleMode(f"{module}.{name} is not a pass")
    args = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    return {"name": name, "args": args} if args else {"name": name}


def _applied_passes(value: ast.expr, names: set[str]) -> list[PassJson] | None:
    """The passes `value` applies to the module (`P()(mod)`, `Sequential([...])(mod)`), or None
    when it is the module itself under another name."""
    if isinstance(value, ast.Name) and value.id in names:
        return None
    if not (isinstance(value, ast.Call) and len(value.args) == 1
            and isinstance(value.args[0], ast.Name) and value.args[0].id in names):
        raise NotModuleMode("not a pass applied to the module")
    func = value.func
    if isinstance(func, ast.Call) and _dotted(func.func).endswith("Sequential"):
        if not func.args or not isinstance(func.args[0], ast.List):
            raise NotModuleMode("a Sequential without a list")
        return [_pass_spec(p) for p in func.args[0].elts]
    return [_pass_spec(func)]


def _build_target(call: ast.Call) -> None:
    target = next((kw.value for kw in call.keywords if kw.arg == "target"),
                  call.args[1] if len(call.args) > 1 else None)
    if isinstance(target, ast.Call) and target.args:
        target = target.args[0]  # tvm.target.Target("llvm")
    if not (isinstance(target, ast.Constant) and target.value == "llvm"):
        raise NotModuleMode("a build for another target than llvm")
    if len(call.keywords) + len(call.args) > 2:
        raise NotModuleMode("a build with options")


def _opt_level(node: ast.With) -> int:
    call = node.items[0].context_expr
    if len(node.items) != 1 or not isinstance(call, ast.Call) or call.args \
            or not _dotted(call.func).endswith("PassContext") \
            or [kw.arg for kw in call.keywords] != ["opt_level"]:
        raise NotModuleMode("a context other than PassContext(opt_level=N)")
    return int(ast.literal_eval(call.keywords[0].value))


class _Reader:
    """Reads the statements after the module class, in order."""

    def __init__(self, module: str) -> None:
        self.names = {module}
        self.passes: list[PassJson] = []
        self.built = False
        self.opt_level = 3

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and _dotted(node.value.func).split(".")[-1] in _DISPLAY:
            return
        if isinstance(node, ast.With) and not self.built:
            self.opt_level = _opt_level(node)
            for inner in node.body:
                self.statement(inner)
            return
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            raise NotModuleMode(f"a statement of another kind at line {node.lineno}")
        self.assignment(node.targets[0].id, node.value)

    def assignment(self, name: str, value: ast.expr) -> None:
        if isinstance(value, ast.Call) and _dotted(value.func).endswith("VirtualMachine"):
            if not self.built:
                raise NotModuleMode("a VM before the build")
            return
        if isinstance(value, ast.Call) and _dotted(value.func).endswith("relax.build"):
            if self.built or not value.args or _dotted(value.args[0]) not in self.names:
                raise NotModuleMode("a build of something else")
            _build_target(value)
            self.built = True
            return
        if self.built:
            raise NotModuleMode("passes after the build")
        self.passes += _applied_passes(value, self.names) or []
        self.names.add(name)


def module_case(script: str, title: str) -> dict[str, Any] | None:
    """The module-mode case (JSON) of a script that is a module, passes and a build, else None."""
    tree = parse_python(script)
    modules = [node for node in tree.body if isinstance(node, ast.ClassDef) and _is_ir_module(node)]
    if len(modules) != 1:
        return None
    at = tree.body.index(modules[0])
    head = [n for n in tree.body[:at] if not isinstance(n, ast.Import | ast.ImportFrom)]
    reader = _Reader(modules[0].name)
    try:
        if head:
            raise NotModuleMode("statements before the module")
        for node in tree.body[at + 1:]:
            reader.statement(node)
    except (NotModuleMode, ValueError, TypeError, SyntaxError):
        return None
    if not reader.built:
        return None
    lines = script.splitlines()
    source = "\n".join(lines[:modules[0].end_lineno]) + "\n"
    return {"title": title, "source": source, "module": modules[0].name,
            "variants": [{"name": "report", "passes": reader.passes}], "target": "llvm",
            "opt_level": reader.opt_level}
