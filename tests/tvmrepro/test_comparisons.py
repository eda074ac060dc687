"""Where two runs' IR parts, and a job's comparisons (first variant against the others)."""

from __future__ import annotations

from typing import Any

from tvmrepro.api.views import CellRef, PassIR
from tvmrepro.jobs.comparisons import (
    MAX_DIFF_CHARS,
    compare,
    first_difference,
    job_comparisons,
    passes_of,
)
from tvmrepro.lifecycle import RunState
from tvmrepro.store.rows import JobRow, RunRow


def stored(*irs: str) -> list[dict[str, Any]]:
    """Pass records as the store keeps them, with these IRs (named P0, P1, ...)."""
    return [{"index": n, "name": f"P{n}", "seconds": 0.0, "functions": [], "ir": ir}
            for n, ir in enumerate(irs)]


def passes(*irs: str) -> list[PassIR]:
    """Passes with these IRs (named P0, P1, ...)."""
    return passes_of(stored(*irs))


def test_first_difference() -> None:
    assert first_difference(passes("a", "b"), passes("a", "b")) is None
    assert first_difference(passes("a", "b", "c"), passes("a", "b", "x", "y")) == 2
    assert first_difference(passes("a", "b"), passes("a", "b", "c")) == 2
    assert first_difference(passes("x"), passes("a")) == 0


def test_compare_diffs_the_ir_after_the_first_differing_pass() -> None:
    a, b = CellRef(variant="once", environment="e"), CellRef(variant="twice", environment="e")
    found = compare(a, passes("m", "n\nold\n"), b, passes("m", "n\nnew\n", "z"))
    assert found.first_differing_pass is not None
    assert (found.first_differing_pass.index, found.first_differing_pass.a) == (1, "P1")
    assert "-old\n+new\n" in found.diff and found.diff.startswith("--- once@e after pass 1")
    same = compare(a, passes("m"), b, passes("m"))
    assert same.identical and same.diff == ""
    long = compare(a, passes("x\n" * MAX_DIFF_CHARS), b, passes("y\n" * MAX_DIFF_CHARS))
    assert long.truncated and len(long.diff) == MAX_DIFF_CHARS


def test_a_job_compares_its_first_variant_with_the_others_where_both_are_done() -> None:
    def run(variant: str, env: str, state: RunState = RunState.DONE) -> RunRow:
        done = state == RunState.DONE
        return RunRow(id=f"{variant}@{env}", job_id="j", ordinal=0, variant=variant,
                      environment=env, state=state, cache_key="k", timeout_s=60,
                      created_at=0.0, result_id=f"{variant}@{env}" if done else None)

    job = JobRow(id="j", kind="run", case={}, variants=["once", "twice", "thrice"],
                 environments=["old", "new"], created_at=0.0, runs=[
                     run("once", "old"), run("twice", "old"), run("thrice", "old"),
                     run("once", "new"), run("twice", "new", RunState.RUNNING),
                     run("thrice", "new")])
    loaded: list[str] = []

    def load(result_id: str) -> list[dict[str, Any]]:
        loaded.append(result_id)
        return stored("a", result_id)

    found = job_comparisons(job, load)
    assert [(c.a.variant, c.b.variant, c.a.environment) for c in found] == [
        ("once", "twice", "old"), ("once", "thrice", "old"), ("once", "thrice", "new")]
    assert all(c.first_differing_pass and c.first_differing_pass.index == 1 for c in found)
    assert "twice@new" not in loaded
