"""Version-proof signatures: the error type, the TVM C++ function that raised, the message's gist.

A signature anchors on the innermost TVM C++ function in the backtrace that
TVM attaches to its errors (TVM_BACKTRACE=1), as crash triage anchors on top
frames: a check reworded between releases still fails in the same function.
The normalised message is its second part, used alone when no C++ frame
raised (an error from Python, or from the FFI's argument conversion). Every
rule here is a mechanism over a class of drift (renamed types, qualified
names, FFI function signatures, printed IR objects, presence checks), never a
table of known messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# Things TVM renamed between releases, read one way. Order matters: longer names first.
_SYNONYMS: tuple[tuple[str, str], ...] = (
    (r"\bffi::PackedFunc\b", "ffi::Function"),
    (r"\bPackedFunc\b", "ffi::Function"),
    (r"StructInfo", "Type"),  # also inside identifiers: InferStructInfoMatmul, TensorStructInfoNode
    (r"\bstruct[_ ]info_?\b", "ty"),
    (r"\bsinfo_args\b", "ty_args"),
    (r"\bout_sinfo\b", "out_ty"),
    (r"\b(?:Relax|Prim|Base)Expr\b", "Expr"),  # one Expr since 0.26
    (r"\btvm\.tir\b", "tvm.tirx"),
    (r"\bNDArray\b", "Tensor"),
    (r"\bT\.block\b", "T.sblock"),
)
# `relax.op.add(0: ir.RelaxExpr, 1: ir.RelaxExpr) -> ir.RelaxExpr`: argument lists and
# return types change with every release (qualification, an extra optional argument).
_FFI_SIGNATURE = re.compile(
    r"(?<![\w.:])(?P<name>[\w.:]+)\(\s*\d+:[^()`]*\)(?:\s*->\s*[\w.:]+(?:<[\w.:<>, ]*>)?)?")
# A type qualified by its module or namespace reads unqualified: ir.Tuple, relax.expr.Tuple,
# tvm::relax::Tuple are one Tuple (types moved between ir, relax and tirx). What
# `\b(?:[a-z_][a-z0-9_]*(?:\.|::))+(?=[A-Z])` removes, removed by `unqualified` in one pass (the
# pattern itself is quadratic: it walks a long chain again from each of its segments).
_QUALIFIER = re.compile(r"[a-z_][a-z0-9_]*(?:\.|::)")
# Presence tests in a check's condition: x.defined(), x.has_value(), !x.IsMissing(), x != nullptr.
# An operand starts where a run of its characters starts (as `_FFI_SIGNATURE`'s name does): the
# leftmost match is the same, and a long run that is no operand is scanned once, not once from
# each of its characters (quadratic on a forged message).
_OPERAND = r"(?<![\w.\->\[\]])([\w.\->\[\]]+)"
_PRESENCE: tuple[tuple[str, str], ...] = (
    (r"!\s*([\w.\->\[\]]+)\.IsMissing\(\)", r"\1 is set"),
    (_OPERAND + r"\.IsMissing\(\)", r"!\1 is set"),
    (_OPERAND + r"\.(?:defined|has_value)\(\)", r"\1 is set"),
    # (and where a match of it ended, as the scan goes on there: `x != nullptry != nullptr`)
    (r"(?:(?<![\w.\->\[\]])|(?<=nullptr))([\w.\->\[\]]+)(?:\.get\(\))?\s*!=\s*nullptr",
     r"\1 is set"),
)
_NOISE: tuple[tuple[str, str], ...] = (
    (r"0x[0-9a-fA-F]+", "0x?"),
    (r"(?:/[\w.+\-@]+)+/?(?::\d+)*", "<path>"),  # absolute paths, with :line:column
    (r"\b[\w\-]+\.(?:py|cc|h|cpp|so)(?::\d+)?\b", "<file>"),
    (r"\bline \d+\b", "line ?"),
    (r"\bat \d+:\d+\b", "at ?"),
    (r"\s+", " "),
)
# What normalize reads of a text: more than a message holds (an error type and MESSAGE_CAP
# characters). Its patterns are linear (tests/harness/test_signature_bounds.py measures them on
# forged text), and a quadratic one would cost little here.
NORMALIZE_CAP = 4096
_REPR_START = re.compile(r"\b(?P<type>[A-Z]\w*)\((?=\w+=)")
_REPR_NAME = re.compile(r"\b(?:name|name_hint|global_symbol)=\"?(?P<name>[\w.]+)")

# C++ frames that report an error rather than detect it: skip to their caller.
_REPORTING_FRAME = re.compile(r"(?:^|\s)(?:std::|__|tvm::ffi::)|(?:Fatal|ErrorBuilder|Throw\w*|Report\w*)$")
_CXX_FILE = re.compile(r"(?:\.(?:cc|cpp|cxx|cu|h|hpp)|<unknown>)$")


@dataclass(frozen=True)
class Signature:
    """The parts of a signature: the raising frame (if known) and the normalised message."""

    error_type: str
    frame: str | None
    message: str

    @property
    def text(self) -> str:
        """The signature: type and frame (and the program's names it mentions), else the message."""
        if self.frame is None:
            return f"{self.error_type}: {self.message}"
        names = program_names(self.message)
        return f"{self.error_type} at {self.frame}" + (f" ({', '.join(names)})" if names else "")


def _closing(text: str, start: int, open_ch: str = "(", close_ch: str = ")") -> int:
    """Index just past the bracket that closes the one opened before `start`, or -1."""
    depth = 1
    for index in range(start, len(text)):
        depth += {open_ch: 1, close_ch: -1}.get(text[index], 0)
        if depth == 0:
            return index + 1
    return -1


def _collapse_reprs(text: str) -> str:
    """`ir.Op(span=None, ty=..., name="relax.add", ...)` reads `Op(relax.add)`: fields drift."""
    out, position = [], 0
    for match in _REPR_START.finditer(text):
        if match.start() < position:
            continue  # inside a repr already collapsed
        end = _closing(text, match.end())
        if end < 0:
            break
        body = text[match.end():end - 1]
        named = _REPR_NAME.search(body)
        out.append(text[position:match.start()])
        out.append(f"{match['type']}({named['name'] if named else '...'})")
        position = end
    return "".join(out) + text[position:]


def normalize(text: str) -> str:
    """Drop addresses, paths, line numbers, FFI signatures and object fields; word renames one way.

    Reads at most NORMALIZE_CAP characters: a message is cut to classify.MESSAGE_CAP first, and
    a result forged to hold a longer one (the worker reads it for an environment's defect)
    costs no more than that."""
    text = _collapse_reprs(text[:NORMALIZE_CAP])
    text = _FFI_SIGNATURE.sub(lambda m: f"{m['name']}(...)", text)
    for pattern, replacement in _SYNONYMS + _PRESENCE:
        text = re.sub(pattern, replacement, text)
    text = unqualified(text)
    for pattern, replacement in _NOISE:
        text = re.sub(pattern, replacement, text)
    return text.strip()


def unqualified(text: str) -> str:
    """`text` without the qualifiers of its types (`_QUALIFIER`): a chain of them that starts a
    word and ends at a capital is removed. A chain that ends elsewhere is skipped whole: each
    of its segments starts the same chain, so none of them ends at a capital either."""
    out, kept, index = [], 0, 0
    while index < len(text):
        char = text[index]
        if not ("a" <= char <= "z" or char == "_") or (
                index and (text[index - 1].isalnum() or text[index - 1] == "_")):
            index += 1  # no word starts here
            continue
        end = index
        while (segment := _QUALIFIER.match(text, end)) is not None:
            end = segment.end()
        if index < end < len(text) and "A" <= text[end] <= "Z":
            out.append(text[kept:index])
            kept = end
        index = max(end, index + 1)
    out.append(text[kept:])
    return "".join(out)


# Names of the program (functions, variables) a message mentions: snake_case identifiers that
# are not code (a call, a member, a qualified name). Rewordings keep them; a numeric suffix
# (lv3, gv1) is the renaming of a pass, not the bug.
_PROGRAM_NAME = re.compile(r"(?<![\w.:>\-])([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)(?![\w(]|::|\.\w)")


def program_names(message: str, limit: int = 3) -> list[str]:
    """Up to `limit` program names in a normalised message, in order, without numeric suffixes.

    A failed check's condition is code (it changes with the check's spelling): names
    come from what follows it ("Check failed: (cond) is false: msg", "... (a vs. b) : msg").
    """
    if message.startswith("Check failed:"):
        for separator in (" is false:", " : "):
            if separator in message:
                message = message.split(separator, 1)[1]
                break
    names: list[str] = []
    for match in _PROGRAM_NAME.finditer(message):
        name = re.sub(r"\d+$", "", match[1])
        if name not in names and any(c.islower() for c in name) and not name.endswith("_t"):
            names.append(name)
    return names[:limit]


def frame_name(raw: str) -> str | None:
    """'void tvm::runtime::vm::VirtualMachineImpl::InitFuncPool()' -> 'VirtualMachineImpl::InitFuncPool'."""
    text = re.sub(r"\s*\[with .*\]$", "", raw.strip())
    text = strip_nested(text, "<", ">")
    text = strip_nested(text, "(", ")", keep="operator")
    text = re.sub(r"\s+const$", "", text)
    text = re.sub(r"::operator\s+[\w:]+$", "::operator", text)  # a conversion operator
    qualified = text.split(" ")[-1] if text else ""  # without the return type
    parts = [p for p in qualified.split("::") if p and not p.startswith(("{", "operator"))]
    while len(parts) > 1 and (parts[0][:1].islower() or parts[0].startswith("(")):
        parts.pop(0)  # namespaces (tvm, relax, runtime::vm) move between releases
    if not parts or _REPORTING_FRAME.search(qualified):
        return None
    return re.sub("StructInfo", "Type", "::".join(parts))


def strip_nested(text: str, open_ch: str, close_ch: str, keep: str = "") -> str:
    """Remove bracketed groups (template arguments, parameter lists), nested ones included."""
    out, depth = [], 0
    for index, char in enumerate(text):
        if char == open_ch and not (keep and text[:index].endswith(keep)):
            depth += 1
        elif char == close_ch and depth:
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out).strip()


def raising_frame(frames: Iterable[tuple[str, str]]) -> str | None:
    """The innermost TVM C++ function among (filename, function) frames, outermost first.

    None when the innermost frame that is not a reporting helper is Python: then
    Python raised the error (or the FFI refused an argument) and no C++ function did.
    """
    for filename, function in reversed(list(frames)):
        if not _CXX_FILE.search(filename) or "::" not in function:
            return None
        name = frame_name(function)
        if name is not None:
            return name
    return None


def python_place(frames: Iterable[tuple[str, str]]) -> str | None:
    """'fold(constant.py)': the innermost frame of TVM's Python package (file name, not its
    package: modules move between releases, as tvm.tir did to tvm.tirx), or None."""
    for filename, function in reversed(list(frames)):
        if filename.endswith(".py") and "/tvm/" in filename:
            return f"{function} ({filename.rsplit('/', 1)[-1]})"
    return None


def make(error_type: str, message: str, frames: Iterable[tuple[str, str]] = ()) -> Signature:
    """The signature of an error of `error_type` with `message`, raised through `frames`.

    An error that says nothing but its type (a bare `assert` in TVM's Python) would read the
    same as every other such error anywhere: where it was raised in TVM's Python is its place."""
    frames = list(frames)
    frame, gist = raising_frame(frames), normalize(message)
    if frame is None and gist in ("", error_type):
        frame = python_place(frames)
    return Signature(error_type, frame, gist)
