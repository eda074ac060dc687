"""The compare matrix's pure parts: job status, signature groups, the first differing pass."""

from __future__ import annotations

from typing import Any

from service.matrix import build_matrix, compare, first_difference, job_status
from tvmrepro.models import CellRef, JobStatus


def passes(*irs: str) -> list[dict[str, Any]]:
    """Pass records with these IRs (named P0, P1, ...)."""
    return [{"index": n, "name": f"P{n}", "ir": ir} for n, ir in enumerate(irs)]


def run(variant: str, env: str, state: str = "done", status: str | None = "ok",
        signature: str | None = None) -> dict[str, Any]:
    """A stored run row with its result summary."""
    result = None if status is None else {"status": status, "stage": "vm_init",
                                          "signature": signature}
    return {"id": f"{variant}@{env}", "variant": variant, "environment": env, "state": state,
            "cached": False, "result_id": f"{variant}@{env}" if result else None,
            "result": result}


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


def test_job_status_follows_its_runs() -> None:
    assert job_status([run("v", "e", "queued", None)] * 2) is JobStatus.QUEUED
    assert job_status([run("v", "e", "queued", None), run("v", "f")]) is JobStatus.RUNNING
    assert job_status([run("v", "e"), run("v", "f", status="error")]) is JobStatus.DONE
    assert job_status([run("v", "e", status="infra_error")] * 2) is JobStatus.FAILED


def test_matrix_groups_cells_by_signature() -> None:
    job = {"variants": ["once", "twice"], "environments": ["old", "new"], "runs": [
        run("once", "old", status="error", signature="S"),
        run("once", "new", status="error", signature="S"),
        run("twice", "old"), run("twice", "new", "running", None)]}
    matrix = build_matrix(job, lambda result_id: passes("a", result_id))
    assert [[c.status for c in row] for row in matrix.cells] == [["error", "error"], ["ok", None]]
    (group,) = matrix.groups
    assert [(c.variant, c.environment) for c in group.cells] == [("once", "old"), ("once", "new")]
    # Only cells that are both done are compared: twice@new is still running.
    assert [(c.a.environment, c.b.variant) for c in matrix.comparisons] == [("old", "twice")]
    assert matrix.comparisons[0].first_differing_pass is not None
    assert matrix.comparisons[0].first_differing_pass.index == 1
