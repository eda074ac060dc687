"""The compare matrix's pure parts: job status, cells, signature groups, stored comparisons."""

from __future__ import annotations

from service.matrix import build_matrix, job_status
from tvmrepro.lifecycle import RunState
from tvmrepro.models import CellRef, Comparison, JobStatus
from tvmrepro.rows import JobRow, RunRow


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
