"""The compare matrix: variants x environments, signature groups, and where variants' IR parts.

The comparisons are not made here: they are computed once, when a job's last run is
stored, and read with the job (tvmrepro.comparisons, Store.settle_comparisons).
"""

from __future__ import annotations

from tvmrepro.lifecycle import RunState
from tvmrepro.models import Cell, CellRef, Comparison, JobStatus, Matrix, SignatureGroup
from tvmrepro.results import Status
from tvmrepro.rows import JobRow, RunRow


def job_status(runs: list[RunRow]) -> JobStatus:
    """queued (nothing started), running, done, or failed (every result is an infra_error)."""
    if all(run.done for run in runs):
        failed = bool(runs) and all(run.status == Status.INFRA_ERROR for run in runs)
        return JobStatus.FAILED if failed else JobStatus.DONE
    if all(run.state == RunState.QUEUED for run in runs):
        return JobStatus.QUEUED
    return JobStatus.RUNNING


def make_cell(run: RunRow) -> Cell:
    """The matrix cell of one stored run."""
    result = run.result or {}
    return Cell(variant=run.variant, environment=run.environment, run=run.id, state=run.state,
                status=result.get("status"), stage=result.get("stage"),
                signature=result.get("signature"), cached=run.cached)


def signature_groups(cells: list[Cell]) -> list[SignatureGroup]:
    """Cells with the same signature, in first-seen order (ok cells have none)."""
    groups: dict[str, SignatureGroup] = {}
    for cell in cells:
        if cell.signature is None:
            continue
        group = groups.setdefault(cell.signature, SignatureGroup(
            signature=cell.signature, status=cell.status or "", cells=[]))
        group.cells.append(CellRef(variant=cell.variant, environment=cell.environment))
    return list(groups.values())


def build_matrix(job: JobRow, comparisons: list[Comparison] | None = None) -> Matrix:
    """The matrix of a stored job, with its stored comparisons (none until it is finished)."""
    by_cell = {(run.variant, run.environment): make_cell(run) for run in job.runs}
    rows = [[by_cell[(v, e)] for e in job.environments] for v in job.variants]
    flat = [cell for row in rows for cell in row]
    found = comparisons if comparisons is not None else job.comparisons
    return Matrix(variants=job.variants, environments=job.environments, cells=rows,
                  groups=signature_groups(flat), comparisons=found or [])
