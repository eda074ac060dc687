"""The compare matrix: variants x environments, signature groups, and where variants' IR parts.

The comparisons are not made here: they are computed once, when a job's last run is
stored, and read with the job (tvmrepro.jobs.comparisons, tvmrepro.jobs.settling).
"""

from __future__ import annotations

from typing import Any

from tvmrepro.api.views import (
    Cell,
    CellRef,
    Comparison,
    JobStatus,
    Matrix,
    OutputError,
    SignatureGroup,
)
from tvmrepro.lifecycle import RunState
from tvmrepro.outputs import compare_outputs
from tvmrepro.results import Status
from tvmrepro.store.rows import JobRow, RunRow

REFERENCE = "numpy reference"  # the `against` variant of a cell compared with the case's reference
# Worse last: a cell keeps the worst of its comparisons (a differs stays differs).
_RANK = {None: 0, "same": 1, "noise": 2, "differs": 3}


def job_status(runs: list[RunRow], settled: bool = True) -> JobStatus:
    """queued (nothing started), running, done, or failed (every result is an infra_error).
    Not `settled` (its last run stored, its comparisons not yet): running, so that a client
    that stops polling at done finds them there."""
    if all(run.done for run in runs) and settled:
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


def _majority(cells: list[tuple[Cell, Any]]) -> tuple[Cell, Any] | None:
    """The representative of the largest group of cells whose outputs agree (ties: the newest)."""
    groups: list[list[int]] = []
    for index, (_, value) in enumerate(cells):
        for group in groups:
            found = compare_outputs(value, cells[group[0]][1])
            if found is not None and found.outputs != "differs":  # noise agrees
                group.append(index)
                break
        else:
            groups.append([index])
    if not groups:
        return None
    best = max(groups, key=lambda group: (len(group), group[-1]))
    return cells[best[-1]]


def _flag(cell: Cell, outputs: Any, reference: tuple[Cell, Any]) -> None:
    """Mark `cell` same, noise or differs against `reference`, keeping the worst verdict."""
    found = compare_outputs(outputs, reference[1])
    if found is None or _RANK[found.outputs] <= _RANK[cell.outputs]:
        return
    cell.outputs = found.outputs
    if found.outputs != "same":
        cell.output_error = OutputError(
            against=CellRef(variant=reference[0].variant, environment=reference[0].environment),
            reason=found.reason or "values", max_abs_error=found.max_abs_error,
            max_rel_error=found.max_rel_error, mismatches=found.mismatches)


def reference_name(kind: str | None) -> str:
    """The `against` variant of a comparison with a run's reference: the case's NumPy
    expression, or the framework a script's imported model ran in ("onnxruntime 1.31.1")."""
    return f"{kind} reference" if kind else REFERENCE


def flag_references(rows: list[list[Cell]], references: dict[str, tuple[Any, str | None]],
                    outputs: dict[str, Any]) -> None:
    """Compare each cell's outputs with what its run's reference computed there (the case's
    NumPy expression, or a script's model in its own framework): by run, (outputs, kind)."""
    for row in rows:
        for cell in row:
            expected, kind = references.get(cell.run) or (None, None)
            if expected is not None and outputs.get(cell.run) is not None:
                _flag(cell, outputs[cell.run], (
                    Cell(variant=reference_name(kind), environment=cell.environment, run="",
                         state=cell.state), expected))


def flag_outputs(rows: list[list[Cell]], outputs: dict[str, Any]) -> None:
    """Compare outputs across releases (the row's majority) and across variants (the first row).

    A silent miscompile shows as `differs`: one release computing another result than the
    others for the same variant, or one variant another result than the first in the same
    release.
    """
    for row in rows:
        with_outputs = [(c, outputs[c.run]) for c in row if outputs.get(c.run) is not None]
        majority = _majority(with_outputs)
        for cell, value in with_outputs:
            if majority is not None:
                _flag(cell, value, majority)
    for column in zip(*rows, strict=True):
        first = next(((c, outputs[c.run]) for c in column if outputs.get(c.run) is not None), None)
        for cell in column:
            if first is not None and cell is not first[0] and outputs.get(cell.run) is not None:
                _flag(cell, outputs[cell.run], first)


def build_matrix(job: JobRow, comparisons: list[Comparison] | None = None) -> Matrix:
    """The matrix of a stored job, with its stored comparisons (none until it is finished)."""
    by_cell = {(run.variant, run.environment): make_cell(run) for run in job.runs}
    rows = [[by_cell[(v, e)] for e in job.environments] for v in job.variants]
    outputs = {run.id: (run.result or {}).get("outputs") for run in job.runs}
    flag_references(rows, {run.id: ((run.result or {}).get("reference_outputs"),
                                    (run.result or {}).get("reference_kind"))
                           for run in job.runs}, outputs)
    flag_outputs(rows, outputs)
    flat = [cell for row in rows for cell in row]
    found = comparisons if comparisons is not None else job.comparisons
    return Matrix(variants=job.variants, environments=job.environments, cells=rows,
                  groups=signature_groups(flat), comparisons=found or [])
