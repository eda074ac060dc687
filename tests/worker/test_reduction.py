"""The reducer's pure parts: ddmin over a list, and counting lines (no TVM)."""

from __future__ import annotations

from worker.reduction import ddmin, source_lines


def first_holding_of(predicate):  # type: ignore[no-untyped-def]
    """A `first_holding` that records every configuration it was asked about."""
    asked: list[list[str]] = []

    def first_holding(configs: list[list[str]]) -> int | None:
        asked.extend(configs)
        return next((i for i, c in enumerate(configs) if predicate(c)), None)

    return first_holding, asked


def test_ddmin_keeps_exactly_the_items_the_failure_needs() -> None:
    passes = ["FuseTIR", "LambdaLift", "Normalize", "AllocateWorkspace", "DeadCodeElimination"]
    first, asked = first_holding_of(lambda c: "LambdaLift" in c and "AllocateWorkspace" in c)
    assert ddmin(passes, first) == ["LambdaLift", "AllocateWorkspace"]
    assert all(len(c) < len(passes) for c in asked)


def test_ddmin_keeps_order_and_may_end_empty() -> None:
    first, _asked = first_holding_of(lambda c: True)
    assert ddmin(["A", "B", "C"], first) == []
    first, _asked = first_holding_of(lambda c: c[-1:] == ["C"] and "A" in c)
    assert ddmin(["A", "B", "C"], first) == ["A", "C"]


def test_ddmin_of_a_list_that_needs_everything_is_the_list() -> None:
    items = ["A", "B", "C", "D"]
    first, _asked = first_holding_of(lambda c: c == items)
    assert ddmin(items, first) == items


def test_source_lines_skip_blank_lines() -> None:
    assert source_lines("a\n\n  \nb\n") == 2
