"""The compare matrix's pure parts: job status, cells, signature groups, stored comparisons."""

from __future__ import annotations

import pytest

from tvmrepro.api.views import CellRef, Comparison, JobStatus
from tvmrepro.jobs.matrix import build_matrix, job_status
from tvmrepro.lifecycle import RunState
from tvmrepro.store.rows import JobRow, RunRow


def run(variant: str, env: str, state: str = "done", status: str | None = "ok",
        signature: str | None = None) -> RunRow:
    """A stored run with its result summary."""
    result = None if status is None else {"status": status, "stage": "vm_init",
                                          "signature": signature}
    return RunRow(id=f"{variant}@{env}", job_id="j", ordinal=0, variant=variant,
                  environment=env, state=RunState(state), cache_key="k",
                  result_id=f"{variant}@{env}" if result else None, timeout_s=60,
                  created_at=0.0, result=result)


def job(runs: list[RunRow], comparisons: list[Comparison] | None = None) -> JobRow:
    """A job of two variants in two environments."""
    return JobRow(id="j", kind="run", case={}, variants=["once", "twice"],
                  environments=["old", "new"], created_at=0.0, runs=runs,
                  comparisons=comparisons)


def test_job_status_follows_its_runs() -> None:
    assert job_status([run("v", "e", "queued", None)] * 2) is JobStatus.QUEUED
    assert job_status([run("v", "e", "queued", None), run("v", "f")]) is JobStatus.RUNNING
    assert job_status([run("v", "e"), run("v", "f", status="error")]) is JobStatus.DONE
    assert job_status([run("v", "e", status="infra_error")] * 2) is JobStatus.FAILED


def test_matrix_groups_cells_by_signature() -> None:
    running = job([run("once", "old", status="error", signature="S"),
                   run("once", "new", status="error", signature="S"),
                   run("twice", "old"), run("twice", "new", "running", None)])
    matrix = build_matrix(running)
    assert [[c.status for c in row] for row in matrix.cells] == [["error", "error"], ["ok", None]]
    (group,) = matrix.groups
    assert [(c.variant, c.environment) for c in group.cells] == [("once", "old"), ("once", "new")]
    assert matrix.comparisons == []  # none until the job's last run is stored


def test_the_matrix_shows_the_stored_comparisons() -> None:
    stored = [Comparison(a=CellRef(variant="once", environment="old"),
                         b=CellRef(variant="twice", environment="old"), identical=True)]
    finished = job([run(v, e) for v in ("once", "twice") for e in ("old", "new")], stored)
    assert build_matrix(finished).comparisons == stored
    given = stored + stored
    assert build_matrix(finished, given).comparisons == given


def _with_outputs(variant: str, env: str, sample: list[float]) -> RunRow:
    row = run(variant, env)
    assert row.result is not None
    row.result["outputs"] = {"shape": [len(sample)], "dtype": "float32", "sha256": str(sample),
                             "sample": sample}
    return row


def test_a_release_that_computes_another_result_differs() -> None:
    three = JobRow(id="j", kind="run", case={}, variants=["v"], environments=["a", "b", "c"],
                   created_at=0.0, runs=[_with_outputs("v", "a", [1.0, 2.0]),
                                         _with_outputs("v", "b", [1.0, 2.5]),
                                         _with_outputs("v", "c", [1.0, 2.0 + 1e-7])])
    (row,) = build_matrix(three).cells
    # a agrees with c, the newest of the majority, within tolerance: noise, not bitwise the same
    assert [c.outputs for c in row] == ["noise", "differs", "same"]
    error = row[1].output_error
    assert error is not None and error.reason == "values"
    assert error.max_abs_error == pytest.approx(0.5) and error.against.environment == "c"


def test_a_variant_that_computes_another_result_differs() -> None:
    two = job([_with_outputs("once", "old", [1.0]), _with_outputs("once", "new", [1.0]),
               _with_outputs("twice", "old", [3.0]), _with_outputs("twice", "new", [3.0])])
    rows = build_matrix(two).cells
    assert [[c.outputs for c in row] for row in rows] == [["same", "same"],
                                                           ["differs", "differs"]]
    assert rows[1][0].output_error is not None
    assert rows[1][0].output_error.against == CellRef(variant="once", environment="old")


def test_cells_without_outputs_are_not_flagged() -> None:
    plain = job([run(v, e) for v in ("once", "twice") for e in ("old", "new")])
    assert [c.outputs for row in build_matrix(plain).cells for c in row] == [None] * 4
