"""A unified diff of two IR texts, bounded in size and in time.

`difflib` is quadratic or worse on lines made to defeat it: 180 KB of forged IR took minutes to
compare. The IR a run prints is the run's own text, so every diff here is bounded:

- the lines both texts open and close with are matched in one linear pass, and only what lies
  between them is diffed;
- `difflib` sees at most MAX_DIFF_LINES of those lines (the first ones of each side), and stops
  at its deadline (checked before each of its searches for a matching block, each of which is
  small at this size);
- past either bound, or for what is left beyond the lines it saw, the region reads as one
  hunk: the lines of one side removed, the other's added. That is still a true diff (applying
  it gives the other text), only not the shortest one.

What comes out is cut at MAX_DIFF_CHARS (`truncated`), as before.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterator, Sequence

MAX_DIFF_CHARS = 64 * 1024  # a diff longer than this is cut (the /ir endpoint has it all)
DIFF_CONTEXT = 3
MAX_DIFF_LINES = 4000  # lines of both sides together that difflib matches at most
PAIR_BUDGET_S = 2.0  # one comparison's matching


class _OutOfTime(Exception):
    pass


class _Timed(difflib.SequenceMatcher):  # type: ignore[type-arg,unused-ignore]
    """difflib's matcher, stopped at a deadline (between its searches, each small here)."""

    def __init__(self, a: Sequence[str], b: Sequence[str], deadline: float) -> None:
        self.deadline = deadline
        super().__init__(None, a, b)

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0,
                           bhi: int | None = None) -> difflib.Match:
        """The base class's, once the deadline has not passed."""
        if time.monotonic() > self.deadline:
            raise _OutOfTime
        return super().find_longest_match(alo, ahi, blo, bhi)


def _range(start: int, stop: int) -> str:
    # difflib's own form of a hunk's range: "start,length", 1-based, "n" for one line.
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + (1 if length else 0)},{length}"


def _common_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """How many lines both open with, and how many they then both close with."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def _hunks(a: list[str], b: list[str], a_at: int, b_at: int,
           deadline: float) -> Iterator[str]:
    """difflib's hunks of `a` against `b` (lines `a_at`, `b_at` on of the whole texts)."""
    for group in _Timed(a, b, deadline).get_grouped_opcodes(DIFF_CONTEXT):
        first, last = group[0], group[-1]
        yield (f"@@ -{_range(first[1] + a_at, last[2] + a_at)} "
               f"+{_range(first[3] + b_at, last[4] + b_at)} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[i1:i2])
                continue
            yield from ("-" + line for line in (a[i1:i2] if tag != "insert" else []))
            yield from ("+" + line for line in (b[j1:j2] if tag != "delete" else []))


def _whole(a: list[str], b: list[str], a_at: int, b_at: int) -> Iterator[str]:
    """One hunk that removes the lines of `a` and adds those of `b` (context lines shared by
    both ends are kept as context)."""
    head, tail = _common_ends(a, b)
    yield (f"@@ -{_range(a_at, a_at + len(a))} +{_range(b_at, b_at + len(b))} @@\n")
    yield from (" " + line for line in a[:head])
    yield from ("-" + line for line in a[head:len(a) - tail])
    yield from ("+" + line for line in b[head:len(b) - tail])
    yield from (" " + line for line in a[len(a) - tail:])


def _lines(a: list[str], b: list[str], deadline: float) -> Iterator[str]:
    head, tail = _common_ends(a, b)
    lo = max(0, head - DIFF_CONTEXT)
    a_hi, b_hi = min(len(a), len(a) - tail + DIFF_CONTEXT), min(len(b), len(b) - tail + DIFF_CONTEXT)
    a_mid, b_mid = a[lo:a_hi], b[lo:b_hi]
    half = MAX_DIFF_LINES // 2
    seen_a, seen_b = min(len(a_mid), half), min(len(b_mid), half)
    if len(a_mid) + len(b_mid) <= MAX_DIFF_LINES:
        seen_a, seen_b = len(a_mid), len(b_mid)
    try:
        found = list(_hunks(a_mid[:seen_a], b_mid[:seen_b], lo, lo, deadline))
    except _OutOfTime:
        found, seen_a, seen_b = [], 0, 0
    yield from found
    if (seen_a, seen_b) != (len(a_mid), len(b_mid)):  # what difflib did not get to
        yield from _whole(a_mid[seen_a:], b_mid[seen_b:], lo + seen_a, lo + seen_b)


def unified_diff(a: str, b: str, fromfile: str, tofile: str,
                 deadline: float | None = None) -> tuple[str, bool]:
    """The unified diff of `a` against `b` (empty when they are equal) and whether it was cut
    at MAX_DIFF_CHARS; matched until `deadline` (time.monotonic), PAIR_BUDGET_S at most."""
    if a == b:
        return "", False
    own = time.monotonic() + PAIR_BUDGET_S
    lines = _lines(a.splitlines(keepends=True), b.splitlines(keepends=True),
                   own if deadline is None else min(own, deadline))
    out = [f"--- {fromfile}\n", f"+++ {tofile}\n"]
    size = sum(map(len, out))
    for line in lines:
        out.append(line)
        size += len(line)
        if size > MAX_DIFF_CHARS:
            return "".join(out)[:MAX_DIFF_CHARS], True
    return "".join(out), False
