"""The compare matrix: variants x environments, signature groups, and where two cells' IR parts."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from tvmrepro.lifecycle import RunState
from tvmrepro.models import Cell, CellRef, Comparison, JobStatus, Matrix, PassStep, SignatureGroup
from tvmrepro.results import Status

MAX_DIFF_CHARS = 64 * 1024  # a diff longer than this is cut (the /ir endpoint has it all)
DIFF_CONTEXT = 3

PassLoader = Callable[[str], list[dict[str, Any]]]


def job_status(runs: list[dict[str, Any]]) -> JobStatus:
    """queued (nothing started), running, done, or failed (every result is an infra_error)."""
    states = [run["state"] for run in runs]
    if all(state == RunState.DONE for state in states):
        statuses = [(run["result"] or {}).get("status") for run in runs]
        if statuses and all(s == Status.INFRA_ERROR for s in statuses):
            return JobStatus.FAILED
        return JobStatus.DONE
    if all(state == RunState.QUEUED for state in states):
        return JobStatus.QUEUED
    return JobStatus.RUNNING


def make_cell(run: dict[str, Any]) -> Cell:
    """The matrix cell of one stored run."""
    result = run["result"] or {}
    return Cell(variant=run["variant"], environment=run["environment"], run=run["id"],
                state=run["state"], status=result.get("status"), stage=result.get("stage"),
                signature=result.get("signature"), cached=run["cached"])


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


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int | None:
    """Index of the first pass after which the IR differs (or one cell has no such pass)."""
    for index in range(max(len(a), len(b))):
        if index >= len(a) or index >= len(b) or a[index]["ir"] != b[index]["ir"]:
            return index
    return None


def _ir_at(passes: list[dict[str, Any]], index: int) -> str:
    # A cell that ran fewer passes is compared by the IR after its last one.
    if not passes:
        return ""
    return str(passes[min(index, len(passes) - 1)]["ir"])


def _label(ref: CellRef, passes: list[dict[str, Any]], index: int) -> str:
    if index < len(passes):
        return f"{ref.variant}@{ref.environment} after pass {index} ({passes[index]['name']})"
    return f"{ref.variant}@{ref.environment} (no pass {index}; IR after its last pass)"


def compare(a: CellRef, a_passes: list[dict[str, Any]], b: CellRef,
            b_passes: list[dict[str, Any]]) -> Comparison:
    """The first pass after which two cells' IR differs, and the diff of the IR after it."""
    index = first_difference(a_passes, b_passes)
    if index is None:
        return Comparison(a=a, b=b, identical=True)
    step = PassStep(index=index,
                    a=a_passes[index]["name"] if index < len(a_passes) else None,
                    b=b_passes[index]["name"] if index < len(b_passes) else None)
    lines = difflib.unified_diff(
        _ir_at(a_passes, index).splitlines(keepends=True),
        _ir_at(b_passes, index).splitlines(keepends=True),
        fromfile=_label(a, a_passes, index), tofile=_label(b, b_passes, index), n=DIFF_CONTEXT)
    diff = "".join(lines)
    truncated = len(diff) > MAX_DIFF_CHARS
    return Comparison(a=a, b=b, identical=False, first_differing_pass=step,
                      diff=diff[:MAX_DIFF_CHARS], truncated=truncated)


def _comparisons(job: dict[str, Any], load: PassLoader) -> list[Comparison]:
    done = {(r["variant"], r["environment"]): r for r in job["runs"]
            if r["state"] == RunState.DONE and r["result_id"]}
    out = []
    first, *others = job["variants"]
    for env_id in job["environments"]:
        base = done.get((first, env_id))
        for variant in others:
            other = done.get((variant, env_id))
            if base is None or other is None:
                continue
            out.append(compare(CellRef(variant=first, environment=env_id),
                               load(base["result_id"]),
                               CellRef(variant=variant, environment=env_id),
                               load(other["result_id"])))
    return out


def build_matrix(job: dict[str, Any], load: PassLoader) -> Matrix:
    """The matrix of a stored job; `load` gives a result's passes with their IR."""
    by_cell = {(run["variant"], run["environment"]): make_cell(run) for run in job["runs"]}
    rows = [[by_cell[(v, e)] for e in job["environments"]] for v in job["variants"]]
    flat = [cell for row in rows for cell in row]
    return Matrix(variants=job["variants"], environments=job["environments"], cells=rows,
                  groups=signature_groups(flat), comparisons=_comparisons(job, load))
