"""Turn an exception into a status, an error type, a message line and a version-proof signature."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .porting import Incompatible

# One vocabulary for things TVM renamed between releases, so that one bug reads
# the same everywhere. Order matters: longer names first.
_SYNONYMS: tuple[tuple[str, str], ...] = (
    (r"\bffi::PackedFunc\b", "ffi::Function"),
    (r"\bPackedFunc\b", "ffi::Function"),
    (r"\b(Tensor|Tuple|Shape|Func|Object|Prim)StructInfo\b", r"\1Type"),
    (r"\bStructInfo\b", "Type"),
    (r"\bstruct_info\b", "ty"),
    (r"\bsinfo_args\b", "ty_args"),
    (r"\bout_sinfo\b", "out_ty"),
    (r"\b(?:tvm\.)?relax\.expr\.(\w+)", r"\1"),
    (r"\b(?:tvm\.)?relax\.(Var|DataflowVar|Call|Function|Tuple|Constant)\b", r"\1"),
    (r"\b(?:tvm\.)?ir\.(Var|GlobalVar)\b", r"\1"),
    (r"\btvm\.tir\b", "tvm.tirx"),
    (r"\bNDArray\b", "Tensor"),
    (r"\bT\.block\b", "T.sblock"),
)
_NOISE: tuple[tuple[str, str], ...] = (
    (r"0x[0-9a-fA-F]+", "0x?"),
    (r"(?:/[\w.+\-@]+)+/?(?::\d+)*", "<path>"),  # absolute paths, with :line:column
    (r"\b[\w\-]+\.(?:py|cc|h|cpp|so)(?::\d+)?\b", "<file>"),
    (r"\bline \d+\b", "line ?"),
    (r"\bat \d+:\d+\b", "at ?"),
    (r"\s+", " "),
)
# Lines that are backtrace, not the error itself.
_FRAME = re.compile(r"^\s*(?:\d+: |File \"|Traceback|  at |\^|File <)")
MESSAGE_CAP = 2000


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as the result reports it."""

    status: str
    error_type: str | None = None
    message: str | None = None
    signature: str | None = None


def first_line(text: str) -> str:
    """The first line of an error text that is the error, not a backtrace frame."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not _FRAME.match(line) and not stripped.startswith("note: run with"):
            return stripped[:MESSAGE_CAP]
    return text.strip()[:MESSAGE_CAP]


def normalize(text: str) -> str:
    """Drop addresses, paths and line numbers; word renamed things one way."""
    for pattern, replacement in _SYNONYMS + _NOISE:
        text = re.sub(pattern, replacement, text)
    return text.strip()


def signature(error_type: str, message: str) -> str:
    """The text that is identical for the same bug on every TVM version."""
    return f"{error_type}: {normalize(message)}"


def _is_api_gap(exc: BaseException) -> bool:
    """An import or attribute of TVM that this release does not have."""
    if isinstance(exc, ImportError):
        return (getattr(exc, "name", None) or "").startswith("tvm") or "tvm" in str(exc)
    if isinstance(exc, AttributeError):
        return bool(re.match(r"module 'tvm[\w.]*' has no attribute", str(exc)))
    return False


def classify(exc: BaseException) -> Outcome:
    """The outcome of a run that raised `exc`."""
    error_type = type(exc).__name__
    message = first_line(str(exc)) or error_type
    sig = signature(error_type, message)
    if isinstance(exc, MemoryError) or "std::bad_alloc" in str(exc):
        return Outcome("oom", error_type, message, sig)
    if isinstance(exc, Incompatible) or _is_api_gap(exc):
        return Outcome("incompatible", error_type, message, sig)
    if isinstance(exc, SystemExit):
        code = exc.code
        if code in (None, 0):
            return Outcome("ok")
        message = f"the script exited with status {code}"
        return Outcome("error", "SystemExit", message, signature("SystemExit", message))
    return Outcome("error", error_type, message, sig)
