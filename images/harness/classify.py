"""Turn an exception into a status, an error type, a message line and a version-proof signature."""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass

from . import signature as signatures
from .api_gap import api_gap
from .porting import Incompatible
from .relay_era import removed_module_message

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
    signature_frame: str | None = None  # the TVM C++ function that raised, normalised
    signature_message: str | None = None  # the message, normalised


def first_line(text: str) -> str:
    """The first line of an error text that is the error, not a backtrace frame.

    A line that ends with a colon announces what follows ("cannot handle this
    intrinsic now:" then the object): the next line is part of it.
    """
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not _FRAME.match(line) and not line.strip().startswith("note: run with")]
    if not lines:
        return text.strip()[:MESSAGE_CAP]
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"[:MESSAGE_CAP]
    return lines[0][:MESSAGE_CAP]


def normalize(text: str) -> str:
    """The message as the signature reads it (see signature.py)."""
    return signatures.normalize(text)


def signature(error_type: str, message: str, frames: list[tuple[str, str]] | None = None) -> str:
    """The text that is identical for the same bug on every TVM version."""
    return signatures.make(error_type, message, frames or ()).text


def frames_of(exc: BaseException) -> list[tuple[str, str]]:
    """(filename, function) of each traceback frame, outermost first; TVM adds its C++ ones."""
    return [(frame.filename, frame.name) for frame in traceback.extract_tb(exc.__traceback__)]


def _failed(status: str, error_type: str, message: str,
            frames: list[tuple[str, str]] | None = None) -> Outcome:
    sig = signatures.make(error_type, message, frames or ())
    return Outcome(status, error_type, message, sig.text, sig.frame, sig.message)


def classify(exc: BaseException) -> Outcome:
    """The outcome of a run that raised `exc`."""
    error_type = type(exc).__name__
    message = first_line(str(exc)) or error_type
    frames = frames_of(exc)
    if isinstance(exc, MemoryError) or "std::bad_alloc" in str(exc):
        return _failed("oom", error_type, message, frames)
    relay_era = removed_module_message(exc)  # Relay and what went with it (relay_era.py)
    if relay_era is not None:
        return _failed("incompatible", error_type, relay_era, frames)
    if isinstance(exc, Incompatible):
        return _failed("incompatible", error_type, message, frames)
    missing = api_gap(exc, message)  # an API this TVM lacks, with the missing name (api_gap.py)
    if missing is not None:
        return _failed("incompatible", error_type, missing, frames)
    if isinstance(exc, SystemExit):
        code = exc.code
        if code in (None, 0):
            return Outcome("ok")
        return _failed("error", "SystemExit", f"the script exited with status {code}")
    return _failed("error", error_type, message, frames)
