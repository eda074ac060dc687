"""The native frames of a crash, read from its log: the evidence a signal alone does not give.

TVM installs a handler that, on a fatal signal, prints a banner (`!!!!!!! Segfault encountered
!!!!!!!`, newer `!!!!!!! TVM FFI encountered a Segfault !!!!!!!`) and the native backtrace,
innermost first, one `File "...", line N, in FUNCTION` line per frame. The innermost C++
function there (past the signal machinery, the C library and thread trampolines) is where the
crash happened: `ToJSONGraph` names the bug as an exception's raising frame does, and two
segfaults in different functions are not one bug.
"""

from __future__ import annotations

import re

from images.harness.signature import strip_nested
from tvmrepro.jobs.bounded import TooSlow, bounded, within

_BANNER = bounded(r"^!!!!!!! .*(?:Segfault|encountered).* !!!!!!!\s*$", re.MULTILINE)
_FRAME = bounded(r'^\s*File "(?P<file>[^"]*)", line \d+, in (?P<function>.+?)\s*$')
# Frames that run the crash's report or start a thread, not the code that crashed.
_NOT_THE_CRASH = bounded(r"^(?:std::|__|_start\b)|Backtrace|SignalHandler|SegFault", re.I)
TOP_FRAMES = 5
_WITH = bounded(r"\s*\[with .*\]$")
_CONST = bounded(r"\s+const$")
# What reading a crash's log may take (tvmrepro.jobs.bounded): a log made to make these
# patterns backtrack costs the crash its frames, never the worker its slot.
CRASH_BUDGET_S = 1.0


def native_name(function: str) -> str | None:
    """'tvm::ffi::ToJSONGraph(tvm::ffi::Any const&, ...)' -> 'ToJSONGraph'; None for what is
    not a C++ function of TVM's (an address, a C function, the standard library)."""
    text = _WITH.sub("", function.strip())
    if "::" not in text or _NOT_THE_CRASH.search(text):
        return None
    text = strip_nested(strip_nested(text, "<", ">"), "(", ")", keep="operator")
    text = _CONST.sub("", text)
    parts = [p for p in text.split(" ")[-1].split("::") if p and not p.startswith("{")]
    while len(parts) > 1 and parts[0][:1].islower():
        parts.pop(0)  # namespaces (tvm, ffi, tirx, runtime::vm) move between releases
    return "::".join(parts) if parts else None


def crash_frames(stderr: str) -> list[str]:
    """The crash's innermost native TVM frames (innermost first, at most TOP_FRAMES), from the
    last backtrace its log holds; [] when it holds none (the crash was in generated code) or
    when reading it takes longer than CRASH_BUDGET_S."""
    try:
        with within(CRASH_BUDGET_S):
            return _frames(stderr)
    except TooSlow:
        return []


def _frames(stderr: str) -> list[str]:
    banners = list(_BANNER.finditer(stderr))
    if not banners:
        return []
    frames: list[str] = []
    for line in stderr[banners[-1].end():].splitlines():
        match = _FRAME.match(line)
        if match is None:
            if frames or line.strip():
                break  # the backtrace is over
            continue
        name = native_name(match["function"])
        if name is not None and name not in frames:
            frames.append(name)
        if len(frames) == TOP_FRAMES:
            break
    return frames
