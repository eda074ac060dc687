"""Where two runs' IR parts: the first pass after which it differs, and the diff after it.

A job's comparisons (in each environment, its first variant against every other)
are computed once, when the job's last run is stored (tvmrepro.jobs.settling), and stored
with the job: reading a job never diffs IR. A comparison between the same two
results in the same cells is stored already when a job's runs came from the cache
(`reusable`): it is copied, not computed again. GET /api/v1/jobs/<id>/compare of two runs
is answered from the stored comparison of their cells and results where there is one
(`run_comparison`), else computed within GET_BUDGET_S. Every diff is bounded in size and time
(tvmrepro.jobs.irdiff): the IR is the run's own text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from tvmrepro.api.views import CellRef, Comparison, PassIR, PassStep
from tvmrepro.jobs.irdiff import MAX_DIFF_CHARS, unified_diff
from tvmrepro.store.rows import JobRow

__all__ = ["MAX_DIFF_CHARS", "compare", "first_difference", "job_comparisons", "passes_of"]
JOB_BUDGET_S = 10.0  # all of one job's comparisons (each one: irdiff.PAIR_BUDGET_S at most)
GET_BUDGET_S = 0.25  # a comparison that a GET makes (of two runs the job never compared)

# A result id -> that run's passes as the store keeps them, each with the TVMScript after it.
PassLoader = Callable[[str], Sequence[Mapping[str, object]]]
# Two cells of a job with the result ids they show: (a, a's result, b, b's result).
Pair = tuple[CellRef, str, CellRef, str]
# The same, by value: (a variant, a environment, a result, b variant, b environment, b result).
PairKey = tuple[str, str, str, str, str, str]


def passes_of(stored: Iterable[Mapping[str, object]]) -> list[PassIR]:
    """A run's passes as the store keeps them, read as models."""
    return [PassIR.model_validate(record) for record in stored]


def first_difference(a: list[PassIR], b: list[PassIR]) -> int | None:
    """Index of the first pass after which the IR differs (or one cell has no such pass)."""
    for index in range(max(len(a), len(b))):
        if index >= len(a) or index >= len(b) or a[index].ir != b[index].ir:
            return index
    return None


def _ir_at(passes: list[PassIR], index: int) -> str:
    # A cell that ran fewer passes is compared by the IR after its last one.
    if not passes:
        return ""
    return passes[min(index, len(passes) - 1)].ir


def _label(ref: CellRef, passes: list[PassIR], index: int) -> str:
    if index < len(passes):
        return f"{ref.variant}@{ref.environment} after pass {index} ({passes[index].name})"
    return f"{ref.variant}@{ref.environment} (no pass {index}; IR after its last pass)"


def compare(a: CellRef, a_passes: list[PassIR], b: CellRef, b_passes: list[PassIR],
            deadline: float | None = None) -> Comparison:
    """The first pass after which two cells' IR differs, and the diff of the IR after it
    (matched until `deadline`, time.monotonic: irdiff.unified_diff)."""
    index = first_difference(a_passes, b_passes)
    if index is None:
        return Comparison(a=a, b=b, identical=True)
    step = PassStep(index=index,
                    a=a_passes[index].name if index < len(a_passes) else None,
                    b=b_passes[index].name if index < len(b_passes) else None)
    diff, truncated = unified_diff(_ir_at(a_passes, index), _ir_at(b_passes, index),
                                   _label(a, a_passes, index), _label(b, b_passes, index),
                                   deadline)
    return Comparison(a=a, b=b, identical=False, first_differing_pass=step, diff=diff,
                      truncated=truncated)


def job_pairs(job: JobRow) -> list[Pair]:
    """In each environment, the job's first variant against every other (cells both done)."""
    done = {(run.variant, run.environment): run.result_id for run in job.runs
            if run.done and run.result_id}
    if not job.variants:
        return []
    out = []
    first, *others = job.variants
    for env_id in job.environments:
        base = done.get((first, env_id))
        for variant in others:
            other = done.get((variant, env_id))
            if base is not None and other is not None:
                out.append((CellRef(variant=first, environment=env_id), base,
                            CellRef(variant=variant, environment=env_id), other))
    return out


def _key(a: CellRef, a_result: str, b: CellRef, b_result: str) -> PairKey:
    return a.variant, a.environment, a_result, b.variant, b.environment, b_result


def reusable(jobs: list[JobRow]) -> dict[PairKey, Comparison]:
    """The comparisons stored with these jobs, by the cells and the result ids they compared.

    A comparison is a function of its two cells and their results alone (a result's passes
    never change), so a job showing the same results in the same cells, as a cache hit
    does, reuses it instead of diffing the IR again.
    """
    known: dict[PairKey, Comparison] = {}
    for job in jobs:
        results = {(a.variant, a.environment, b.variant, b.environment): (a_result, b_result)
                   for a, a_result, b, b_result in job_pairs(job)}
        for found in job.comparisons or []:
            ids = results.get((found.a.variant, found.a.environment,
                               found.b.variant, found.b.environment))
            if ids is not None:
                known[_key(found.a, ids[0], found.b, ids[1])] = found
    return known


def job_comparisons(job: JobRow, load: PassLoader,
                    known: dict[PairKey, Comparison] | None = None) -> list[Comparison]:
    """The job's comparisons (`job_pairs`): those in `known` reused, the others computed,
    all within JOB_BUDGET_S (past it, each region that differs reads as one hunk)."""
    known = known or {}
    deadline = time.monotonic() + JOB_BUDGET_S
    return [known.get(_key(a, a_result, b, b_result))
            or compare(a, passes_of(load(a_result)), b, passes_of(load(b_result)), deadline)
            for a, a_result, b, b_result in job_pairs(job)]


def stored_comparison(job: JobRow, a_result: str, b_result: str) -> Comparison | None:
    """The comparison stored with the job of these two results, in this order, if any."""
    for a, a_id, b, b_id in job_pairs(job):
        if (a_id, b_id) == (a_result, b_result):
            return next((c for c in job.comparisons or [] if (c.a, c.b) == (a, b)), None)
    return None


def run_comparison(job: JobRow, a_run: str, b_run: str, load: PassLoader) -> Comparison | None:
    """Two finished runs of a job compared (None: either is unknown or unfinished): the
    stored comparison of their cells and results, else one made within GET_BUDGET_S."""
    runs = {run.id: run for run in job.runs}
    first, second = runs.get(a_run), runs.get(b_run)
    if first is None or second is None or not first.result_id or not second.result_id:
        return None
    found = stored_comparison(job, first.result_id, second.result_id)
    if found is not None:
        return found
    return compare(CellRef(variant=first.variant, environment=first.environment),
                   passes_of(load(first.result_id)),
                   CellRef(variant=second.variant, environment=second.environment),
                   passes_of(load(second.result_id)), time.monotonic() + GET_BUDGET_S)
