"""Where two runs' IR parts: the first pass after which it differs, and the diff after it.

A job's comparisons (in each environment, its first variant against every other)
are computed once, when the job's last run is stored (tvmrepro.jobs.settling), and stored
with the job: reading a job never diffs IR. A comparison between the same two
results in the same cells is stored already when a job's runs came from the cache
(`reusable`): it is copied, not computed again. `compare` also answers
GET /api/v1/jobs/<id>/compare for any two runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence

from tvmrepro.api.views import CellRef, Comparison, PassIR, PassStep
from tvmrepro.store.rows import JobRow

MAX_DIFF_CHARS = 64 * 1024  # a diff longer than this is cut (the /ir endpoint has it all)
DIFF_CONTEXT = 3

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


def compare(a: CellRef, a_passes: list[PassIR], b: CellRef, b_passes: list[PassIR]) -> Comparison:
    """The first pass after which two cells' IR differs, and the diff of the IR after it."""
    index = first_difference(a_passes, b_passes)
    if index is None:
        return Comparison(a=a, b=b, identical=True)
    step = PassStep(index=index,
                    a=a_passes[index].name if index < len(a_passes) else None,
                    b=b_passes[index].name if index < len(b_passes) else None)
    lines = difflib.unified_diff(
        _ir_at(a_passes, index).splitlines(keepends=True),
        _ir_at(b_passes, index).splitlines(keepends=True),
        fromfile=_label(a, a_passes, index), tofile=_label(b, b_passes, index), n=DIFF_CONTEXT)
    diff = "".join(lines)
    truncated = len(diff) > MAX_DIFF_CHARS
    return Comparison(a=a, b=b, identical=False, first_differing_pass=step,
                      diff=diff[:MAX_DIFF_CHARS], truncated=truncated)


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
    """The job's comparisons (`job_pairs`): those in `known` reused, the others computed."""
    known = known or {}
    return [known.get(_key(a, a_result, b, b_result))
            or compare(a, passes_of(load(a_result)), b, passes_of(load(b_result)))
            for a, a_result, b, b_result in job_pairs(job)]
