"""Zeller's delta debugging (ddmin): the reducer's search over a pass list."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def ddmin(items: Sequence[T], first_holding: Callable[[list[list[T]]], int | None]) -> list[T]:
    """Zeller's ddmin: a 1-minimal sublist; `first_holding` tests configurations, in order."""
    current, n = list(items), 2
    while len(current) >= 2:
        size = -(-len(current) // n)
        chunks = [current[k:k + size] for k in range(0, len(current), size)]
        complements = [[x for c in chunks if c is not chunk for x in c] for chunk in chunks]
        configs = chunks + (complements if len(chunks) > 2 else [])
        found = first_holding(configs)
        if found is not None:
            current = configs[found]
            n = 2 if found < len(chunks) else max(n - 1, 2)
        elif n >= len(current):
            break
        else:
            n = min(len(current), 2 * n)
    if len(current) == 1 and first_holding([[]]) == 0:
        return []
    return current
