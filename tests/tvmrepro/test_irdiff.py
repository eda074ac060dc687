"""The diff of two IR texts, bounded in size and time (tvmrepro.jobs.irdiff): difflib's own
answer where it is cheap, a true diff (applied, it gives the other text) always, and 1 MiB of IR
made to defeat difflib (every other line changed: minutes of difflib) diffed in seconds."""

from __future__ import annotations

import difflib
import re
import time

import pytest

from tvmrepro.jobs.irdiff import MAX_DIFF_CHARS, MAX_DIFF_LINES, PAIR_BUDGET_S, unified_diff

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")


def applied(a: str, diff: str) -> str:
    """`a` with the unified diff applied (each hunk checked against what it removes)."""
    source, out, at = a.splitlines(keepends=True), [], 0
    lines = diff.splitlines(keepends=True)[2:]
    index = 0
    while index < len(lines):
        found = HUNK.match(lines[index].rstrip("\n"))
        assert found, lines[index]
        start = int(found[1]) - (0 if found[2] == "0" else 1)
        out += source[at:start]
        at = start
        index += 1
        while index < len(lines) and not lines[index].startswith("@@ "):
            tag, text = lines[index][0], lines[index][1:]
            if tag in " -":
                assert source[at] == text, (at, source[at], text)
                at += 1
            if tag in " +":
                out.append(text)
            index += 1
    return "".join(out + source[at:])


def lines(count: int, changed: bool = False) -> str:
    return "".join(f"  lv{i} = R.multiply(x, x)\n" if changed and i % 2 else
                   f"  lv{i} = R.add(lv{i - 1}, x)\n" for i in range(count))


def test_a_small_diff_is_difflibs() -> None:
    a = lines(300)
    b = a.replace("lv150 = R.add", "lv150 = R.subtract").replace("  lv20 = R.add(lv19, x)\n", "")
    ours, cut = unified_diff(a, b, "a", "b")
    assert not cut and ours == "".join(difflib.unified_diff(
        a.splitlines(True), b.splitlines(True), "a", "b", n=3))
    assert unified_diff(a, a, "a", "b") == ("", False)


def short(count: int, changed: bool = False) -> str:
    return "".join(f"m{i}\n" if changed and i % 2 else f"v{i}\n" for i in range(count))


@pytest.mark.parametrize("count", [MAX_DIFF_LINES // 4, MAX_DIFF_LINES])  # in bounds, past
def test_past_its_bounds_a_diff_is_still_true(count: int) -> None:
    a, b = short(count), short(count, changed=True)
    for deadline in (None, time.monotonic() - 1):  # matched, then out of time before it starts
        diff, cut = unified_diff(a, b, "a", "b", deadline)
        assert not cut and applied(a, diff) == b
    head = "header\n" * 50
    diff, _ = unified_diff(head + a + "tail\n", head + b + "tail\n", "a", "b")
    assert applied(head + a + "tail\n", diff) == head + b + "tail\n"
    assert 0 < diff.count("header") < 3  # its context, not the 50 lines both open with


def test_a_forged_megabyte_is_diffed_within_its_budget() -> None:
    a, b = lines(40_000), lines(40_000, changed=True)
    assert len(b) >= 1 << 20
    started = time.monotonic()
    diff, cut = unified_diff(a, b, "a", "b")
    took = time.monotonic() - started
    assert cut and len(diff) == MAX_DIFF_CHARS
    assert took < PAIR_BUDGET_S * 3 + 1.0, took  # (difflib alone: minutes)
