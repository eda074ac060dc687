"""Porting rules: rewrite a report's TVMScript and API use to the environment's TVM.

Rules are chosen by what the installed TVM provides (Features, detected once),
never by version strings: a release candidate or a backport may differ from
its neighbours. Each rule is a pure text rewrite, named in the result's
`rewrites` when it changed something. A construct that no rewrite can express
on this TVM raises Incompatible, which ends the run as `incompatible`.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Whole modules that moved between releases (old path under tvm, new path), found by
# comparing the wheels' package trees: tvm.arith became tvm.sym in 0.27; the module
# relax.struct_info became relax.type in 0.26 (its classes are renamed by struct_info-to-type).
MODULE_MOVES: tuple[tuple[str, str], ...] = (
    ("arith", "sym"),
    ("relax.struct_info", "relax.type"),
    ("relax.distributed.struct_info", "relax.distributed.type"),
)
_NEWEST_MODULES = frozenset(new for _, new in MODULE_MOVES)


class Incompatible(Exception):
    """The case cannot be expressed on this TVM version, even after porting."""


@dataclass(frozen=True)
class Features:
    """What the installed TVM provides, as far as porting cares."""

    tirx: bool = True  # tvm.tirx / tvm.script.tirx (0.25+) instead of tvm.tir
    sblock: bool = True  # T.sblock / T.sblock_attr instead of T.block / T.block_attr
    prim_func_s_tir: bool = True  # @T.prim_func(s_tir=True) needed for block-based TIR
    out_ty: bool = True  # R.call_tir(..., out_ty=) and ty_args= (0.26+)
    call_tir_vars: bool = False  # R.call_tir(..., tir_vars=) still exists
    struct_info: bool = False  # relax.TensorStructInfo & co. (before 0.26)
    runtime_tensor: bool = True  # tvm.runtime.tensor instead of tvm.nd.array
    s_tir: bool = True  # tvm.s_tir.dlight / tvm.s_tir.Schedule
    target_flags: bool = False  # Target("cuda -arch=sm_90") still parses (dicts are needed since 0.25)
    # Which paths of MODULE_MOVES import on this TVM (both ends of a move are checked).
    modules: frozenset[str] = field(default_factory=lambda: _NEWEST_MODULES)


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def detect(tvm: Any) -> Features:
    """Inspect the imported TVM."""
    from tvm.script import relax as R

    call_tir_params = inspect.signature(R.call_tir).parameters
    tirx = _importable("tvm.script.tirx")
    script_tir = importlib.import_module("tvm.script.tirx" if tirx else "tvm.script.tir")
    prim_func_params = inspect.signature(script_tir.prim_func).parameters
    return Features(
        tirx=tirx,
        sblock=hasattr(script_tir, "sblock"),
        prim_func_s_tir="s_tir" in prim_func_params,
        out_ty="out_ty" in call_tir_params,
        call_tir_vars="tir_vars" in call_tir_params,
        struct_info=hasattr(tvm.relax, "TensorStructInfo"),
        runtime_tensor=hasattr(tvm.runtime, "tensor"),
        s_tir=_importable("tvm.s_tir"),
        target_flags=_parses_target_flags(tvm),
        modules=frozenset(path for move in MODULE_MOVES for path in move
                          if _importable(f"tvm.{path}")),
    )


def _parses_target_flags(tvm: Any) -> bool:
    try:
        tvm.target.Target("llvm -mcpu=x86-64")
    except Exception:  # TVM raises its own error types here, varying by release
        return False
    return True


_TARGET_KINDS = "llvm|cuda|c|rocm|vulkan|opencl|metal|nvptx|webgpu|hexagon"
_TARGET_STRING = re.compile(
    rf"(?P<q>[\"'])(?P<spec>(?:{_TARGET_KINDS})(?:\s+-[\w-]+(?:=[^\"'\s]*)?)+)(?P=q)")
_LIST_ATTRS = {"libs", "keys", "mattr"}


def target_dict(spec: str) -> dict[str, Any]:
    """'cuda -arch=sm_90 -max_num_threads=1024' as {'kind': 'cuda', 'arch': 'sm_90', ...}."""
    kind, *flags = spec.split()
    out: dict[str, Any] = {"kind": kind}
    for flag in flags:
        key, _, value = flag.lstrip("-").partition("=")
        if not value:
            out[key] = True
        elif key in _LIST_ATTRS:
            out[key] = value.split(",")
        else:
            out[key] = int(value) if value.isdigit() else value
    return out


def port_target(target: str, features: Features) -> str | dict[str, Any]:
    """A case's target in the form this TVM parses."""
    if features.target_flags or not _TARGET_STRING.fullmatch(f'"{target}"'):
        return target
    return target_dict(target)


def _target_strings_to_dicts(text: str) -> str:
    return _TARGET_STRING.sub(lambda m: repr(target_dict(m["spec"])), text)


@dataclass(frozen=True)
class Rule:
    """One rewrite: applied when `needed(features)` holds; listed when it changed the text."""

    name: str
    needed: Callable[[Features], bool]
    rewrite: Callable[[str], str]


def _sub(pattern: str, replacement: str) -> Callable[[str], str]:
    compiled = re.compile(pattern, re.MULTILINE)
    return lambda text: compiled.sub(replacement, text)


def _chain(*steps: Callable[[str], str]) -> Callable[[str], str]:
    def run(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return run


_PRIM_FUNC = re.compile(r"@(?P<alias>\w+)\.prim_func(?P<args>\((?P<inner>[^()]*)\))?")


def _add_s_tir(text: str) -> str:
    """Mark prim funcs of a module that uses blocks as s_tir (else the parser rejects them)."""
    if not re.search(r"\bT\.sblock\(", text):
        return text

    def fix(match: re.Match[str]) -> str:
        inner = (match["inner"] or "").strip()
        if "s_tir" in inner:
            return match[0]
        args = f"{inner}, s_tir=True" if inner else "s_tir=True"
        return f"@{match['alias']}.prim_func({args})"

    return _PRIM_FUNC.sub(fix, text)


def _refuse_tir_vars(text: str) -> str:
    if re.search(r"\btir_vars\s*=", text):
        raise Incompatible("R.call_tir(..., tir_vars=...) no longer exists in this TVM")
    return text


_STRUCT_INFO_NAMES = ("Tensor", "Tuple", "Shape", "Func", "Object")


def _types_to_struct_info(text: str) -> str:
    """relax.TensorType((4,), "float32") (0.26+) back to relax.TensorStructInfo for 0.25, whose
    relax.TensorType is another class (a type of ndim and dtype). A script that names struct
    info anywhere is written for 0.25 already: its relax.*Type are that release's own."""
    if "StructInfo" in text or "struct_info" in text:
        return text
    for name in _STRUCT_INFO_NAMES:
        text = re.sub(rf"\brelax\.{name}Type\b", f"relax.{name}StructInfo", text)
        text = re.sub(rf"(\bfrom tvm\.relax import [^\n]*?)\b{name}Type\b",
                      rf"\1{name}StructInfo", text)
    return re.sub(r"\.ty\b(?!\w)", ".struct_info", text)


def _import_list_item(leaf: str, new_leaf: str) -> Callable[[re.Match[str]], str]:
    """In `from tvm.<parent> import a, leaf, b as c`: `leaf` becomes `new_leaf as leaf`."""
    def fix(match: re.Match[str]) -> str:
        items = []
        for item in match["items"].split(","):
            name, _, alias = (part.strip() for part in item.strip().partition(" as "))
            if name == leaf:
                alias = alias or leaf
                item = f" {new_leaf}" if alias == new_leaf else f" {new_leaf} as {alias}"
            items.append(item)
        return match["head"] + ",".join(items)

    return fix


def move_module(old: str, new: str) -> Callable[[str], str]:
    """Rewrite references to the module tvm.<old> as tvm.<new>: dotted paths and import lists."""
    parent, _, leaf = f"tvm.{old}".rpartition(".")
    new_leaf = new.rpartition(".")[2]
    short_parent = parent.rpartition(".")[2]
    dotted = re.compile(rf"\b(?:tvm\.)?{re.escape(old)}\b" if "." in old else rf"\btvm\.{old}\b")
    listed = re.compile(rf"(?P<head>^[ \t]*from {re.escape(parent)} import)(?P<items>[^\n(#]*)",
                        re.MULTILINE)

    def rewrite(text: str) -> str:
        text = dotted.sub(lambda m: m[0].replace(old, new), text)
        if parent != "tvm":  # `from tvm import relax` then `relax.struct_info`
            text = re.sub(rf"(?<![\w.]){short_parent}\.{leaf}\b", f"{short_parent}.{new_leaf}", text)
        return listed.sub(_import_list_item(leaf, new_leaf), text)

    return rewrite


def _only_at(target: str, source: str) -> Callable[[Features], bool]:
    """Needed where `target` imports and `source` does not."""
    return lambda f: target in f.modules and source not in f.modules


def _module_rules() -> tuple[Rule, ...]:
    """Both directions of every module move, each needed where only its target imports."""
    return tuple(Rule(f"{a}-to-{b}".replace(".", "-"), _only_at(b, a), move_module(a, b))
                 for old, new in MODULE_MOVES for a, b in ((old, new), (new, old)))


RULES: tuple[Rule, ...] = _module_rules() + (
    Rule(
        "dlight-and-schedule-to-s_tir",
        lambda f: f.s_tir,
        _chain(
            _sub(r"\bfrom tvm import dlight\b", "from tvm.s_tir import dlight"),
            _sub(r"\bimport tvm\.dlight as\b", "import tvm.s_tir.dlight as"),
            _sub(r"\btvm\.dlight\b", "tvm.s_tir.dlight"),
            _sub(r"\btvm\.tir\.Schedule\b", "tvm.s_tir.Schedule"),
            _sub(r"\bfrom tvm\.tir import Schedule\b", "from tvm.s_tir import Schedule"),
            _sub(r"\btvm\.tir\.schedule\b", "tvm.s_tir.schedule"),
            _sub(r"\bfrom tvm import meta_schedule\b", "from tvm.s_tir import meta_schedule"),
            _sub(r"\btvm\.meta_schedule\b", "tvm.s_tir.meta_schedule"),
        ),
    ),
    Rule(
        "tir-to-tirx",
        lambda f: f.tirx,
        _chain(
            _sub(r"\bfrom tvm\.script import tir\b", "from tvm.script import tirx"),
            _sub(r"\btvm\.script\.tir\b", "tvm.script.tirx"),
            _sub(r"\bfrom tvm import tir\b", "from tvm import tirx as tir"),
            _sub(r"\btvm\.tir\b", "tvm.tirx"),
        ),
    ),
    Rule(
        "block-to-sblock",
        lambda f: f.sblock,
        _chain(_sub(r"\bT\.block\(", "T.sblock("), _sub(r"\bT\.block_attr\(", "T.sblock_attr(")),
    ),
    Rule("prim-func-s_tir", lambda f: f.prim_func_s_tir, _add_s_tir),
    Rule("out_sinfo-to-out_ty", lambda f: f.out_ty, _sub(r"\bout_sinfo\s*=", "out_ty=")),
    Rule("out_ty-to-out_sinfo", lambda f: not f.out_ty, _sub(r"\bout_ty\s*=", "out_sinfo=")),
    Rule("sinfo_args-to-ty_args", lambda f: f.out_ty, _sub(r"\bsinfo_args\s*=", "ty_args=")),
    Rule("ty_args-to-sinfo_args", lambda f: not f.out_ty, _sub(r"\bty_args\s*=", "sinfo_args=")),
    Rule(
        "struct_info-to-type",
        lambda f: not f.struct_info,
        _chain(
            *(_sub(rf"\b{n}StructInfo\b", f"{n}Type") for n in _STRUCT_INFO_NAMES),
            _sub(r"\.struct_info\b", ".ty"),
        ),
    ),
    Rule("type-to-struct_info", lambda f: f.struct_info, _types_to_struct_info),
    Rule("call_tir-tir_vars-removed", lambda f: not f.call_tir_vars, _refuse_tir_vars),
    Rule("target-string-to-dict", lambda f: not f.target_flags, _target_strings_to_dicts),
    Rule(
        "nd-array-to-runtime-tensor",
        lambda f: f.runtime_tensor,
        _chain(
            _sub(r"\btvm\.(?:nd|runtime\.ndarray)\.array\(", "tvm.runtime.tensor("),
            _sub(r"\btvm\.(?:nd|runtime)\.NDArray\b", "tvm.runtime.Tensor"),
            _sub(r"\btvm\.nd\.empty\(", "tvm.runtime.empty("),
            _sub(r"\.asnumpy\(\)", ".numpy()"),
        ),
    ),
)


def port(source: str, features: Features, rules: tuple[Rule, ...] = RULES) -> tuple[str, list[str]]:
    """Apply every needed rule; return the new text and the names of rules that changed it."""
    applied = []
    for rule in rules:
        if not rule.needed(features):
            continue
        rewritten = rule.rewrite(source)
        if rewritten != source:
            applied.append(rule.name)
            source = rewritten
    return source, applied
