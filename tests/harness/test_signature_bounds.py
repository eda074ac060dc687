"""Signatures cost little on forged text: the harness reads a message within its sandbox, and the
worker reads a result's message again outside (an environment's defect: worker/environments/
health.py), where a forged result may hold 64 KiB. `normalize` reads NORMALIZE_CAP characters at
most, and its patterns that were quadratic are linear now, their answers the same."""

from __future__ import annotations

import random
import re
import sys
import time

from images import IMAGES_DIR

sys.path.insert(0, str(IMAGES_DIR))
from harness.classify import MESSAGE_CAP  # noqa: E402
from harness.signature import (  # noqa: E402
    _FFI_SIGNATURE,
    _PRESENCE,
    NORMALIZE_CAP,
    make,
    normalize,
    program_names,
    unqualified,
)

# What the signature read before: each is quadratic on a long run that is no match.
QUADRATIC_FFI = re.compile(
    r"(?P<name>[\w.:]+)\(\s*\d+:[^()`]*\)(?:\s*->\s*[\w.:]+(?:<[\w.:<>, ]*>)?)?")
QUADRATIC_QUALIFIED = re.compile(r"\b(?:[a-z_][a-z0-9_]*(?:\.|::))+(?=[A-Z])")
QUADRATIC_PRESENCE = [r"!\s*([\w.\->\[\]]+)\.IsMissing\(\)", r"([\w.\->\[\]]+)\.IsMissing\(\)",
                      r"([\w.\->\[\]]+)\.(?:defined|has_value)\(\)",
                      r"([\w.\->\[\]]+)(?:\.get\(\))?\s*!=\s*nullptr"]
UNITS = ["1.", "a_", ".a", "_a", "0x", "(0:", "a.b.c", "x != ", "a::", "Check failed: ( vs. ",
         "a(b=", "[with ", "/a", " ", "nullptr", "a != nullptr"]


def test_normalize_reads_a_message_and_more_at_most() -> None:
    assert NORMALIZE_CAP > MESSAGE_CAP + 100  # every message the harness writes is read whole
    worst = 0.0
    for unit in UNITS:
        text = (unit * (64 << 10))[:64 << 10]
        started = time.monotonic()
        program_names(normalize(text))
        make("InternalError", text)
        worst = max(worst, time.monotonic() - started)
    assert worst < 1.0, worst  # (quadratic before: seconds to minutes at 64 KiB)


def test_the_linear_patterns_answer_as_the_quadratic_ones_did() -> None:
    pieces = ["a", "_", "1", ".", ":", "::", "A", " ", "é", "-", "ir.", "T", "(", ")", "0:", "->",
              "<", ">", ".IsMissing()", "!", ".defined()", ".get()", " != ", "nullptr", "[", "]"]
    rng = random.Random(17)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 16)))
        assert unqualified(text) == QUADRATIC_QUALIFIED.sub("", text), text
        assert _FFI_SIGNATURE.sub("F", text) == QUADRATIC_FFI.sub("F", text), text
        for (ours, replacement), before in zip(_PRESENCE[1:], QUADRATIC_PRESENCE[1:],
                                               strict=True):
            assert re.sub(ours, replacement, text) == re.sub(before, replacement, text), text


def _cpu_seconds(size: int) -> float:
    """The CPU time of every pattern over texts of `size` characters made to backtrack; the
    least of three (a busy host's preemption and cache misses only ever add)."""
    spent = []
    for _ in range(3):
        started = time.process_time()
        for unit in ("1.", "a_", ".a", "x.a_"):
            text = unit * (size // len(unit))
            unqualified(text)
            _FFI_SIGNATURE.sub("F", text)
            for pattern, replacement in _PRESENCE:
                re.sub(pattern, replacement, text)
        spent.append(time.process_time() - started)
    return min(spent)


def test_the_linear_patterns_stay_linear() -> None:
    timings = [_cpu_seconds(4 << 10), _cpu_seconds(32 << 10)]
    assert timings[1] < 8 * timings[0] + 0.05, timings  # 8x the text: linear, not 64x
