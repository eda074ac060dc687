"""Narrowing a report (docs/contract.md, "Reduction"): what a reduce or extract job asks, checked,
and how its row becomes its answer in the job's JSON (the answers' models: narrowed.py).

A reduce job shrinks one module-mode variant in one environment while an
oracle holds; an extract job turns a script into the module-mode case of the
step where it fails. Each is one run of its job (the variant in the
environment) that a worker of that environment takes; the run's result is the
original run (the reference the reduction keeps, or the script's run), and the
job's `reduce` or `extract` object carries the progress, the best case so far
and, at the end, the answer. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from tvmrepro.api.narrowed import Extraction, NarrowState, Reduction
from tvmrepro.cases import Case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.jobs.bisect.logic import choose_variant
from tvmrepro.jobs.narrow import EXTRACT, REDUCE
from tvmrepro.jobs.oracles import parse_oracle

DEFAULT_ORACLE = "signature"
DEFAULT_BUDGET_S = 900
MIN_BUDGET_S = 10
MAX_BUDGET_S = 1800
EXTRACT_POINTS = ("chain", "failing", "inner")
EXTRACTED_VARIANT = "extracted"  # the one variant of an extracted case
# A narrowing run holds its worker for the budget plus the runs around it (the baseline, a
# batch of candidates and a check that started just before the budget ran out; the script
# and the extracted cases tried).
RUNS_AROUND_BUDGET = 4

# What an error names for each option: the API's fields by default, the CLI passes its flags.
API_FIELDS = {"environments": "environments", "variant": "variant", "oracle": "oracle",
              "budget_s": "budget_s", "at": "at", "case": "case"}


@dataclass(frozen=True)
class NarrowOptions:
    """What a reduce or extract job was asked."""

    kind: str
    environment: str
    variant: str
    oracle: str = DEFAULT_ORACLE  # reduce
    budget_s: int = DEFAULT_BUDGET_S  # reduce
    at: str = "chain"  # extract

    def run_timeout_s(self, case: Case) -> int:
        """How long the job's one run may hold its worker before it counts as lost."""
        budget = self.budget_s if self.kind == REDUCE else 0
        return budget + RUNS_AROUND_BUDGET * case.timeout_s


def _one_environment(kind: str, envs: list[Environment], field: str) -> str:
    if len(envs) != 1:
        raise BadInput(field, f"a {kind} job runs in one environment; name exactly one "
                              f"(got {len(envs)})")
    return envs[0].id


def make_options(kind: str, case: Case, envs: list[Environment], variant: str | None = None,
                 oracle: str | None = None, budget_s: int | None = None, at: str | None = None,
                 fields: dict[str, str] | None = None) -> NarrowOptions:
    """A reduce or extract job's options, each checked; BadInput names the wrong field."""
    names = fields or API_FIELDS
    environment = _one_environment(kind, envs, names["environments"])
    if kind == EXTRACT:
        if case.script is None:
            raise BadInput(names["case"], "an extract job takes a script ('script'), not a "
                                          "module-mode case")
        if at is not None and at not in EXTRACT_POINTS:
            raise BadInput(names["at"], f"must be one of {', '.join(EXTRACT_POINTS)}")
        return NarrowOptions(kind, environment, case.variant_names[0], at=at or "chain")
    if case.script is not None:
        raise BadInput(names["case"], "reduce takes a module-mode case; extract the script "
                                      "first (kind: 'extract')")
    try:
        parsed = parse_oracle(oracle or DEFAULT_ORACLE)
    except BadInput as exc:
        raise BadInput(names["oracle"], exc.problem) from exc
    if parsed.kind == "output":
        raise BadInput(names["oracle"], "a reduction judges one environment; `output` needs a "
                                        "reference environment (use signature, failure, "
                                        "status:<s>, signature:<text> or regex:<pattern>)")
    budget = DEFAULT_BUDGET_S if budget_s is None else budget_s
    if not MIN_BUDGET_S <= budget <= MAX_BUDGET_S:
        raise BadInput(names["budget_s"], f"must be {MIN_BUDGET_S} to {MAX_BUDGET_S} seconds")
    return NarrowOptions(kind, environment, choose_variant(case, variant, names["variant"]),
                         parsed.text, budget)


# Progress, and the answer as the job's JSON shows it (its models: narrowed.py) ------------


class ProgressEvent(TypedDict, total=False):
    """What a narrowing tells its progress callback: a `step` taken or edits being `try`ed, in
    a phase, and the sizes so far."""

    kind: Literal["step", "try"]
    phase: str
    what: str
    steps: int
    runs: int
    passes: int | None
    lines: int | None


class StoredProgress(ProgressEvent, total=False):
    """A narrowing's progress as its row keeps it: the last event (without its kind), the
    seconds since it started, and a reduction's best case so far (a Reduced without
    `finished` and `log`)."""

    seconds: float
    best: dict[str, object]


@dataclass(frozen=True)
class NarrowingRow:
    """A reduce or extract job's row in the store: what it was asked, how far it got, its
    answer (a Reduced or Extracted as JSON) or why there is none."""

    options: NarrowOptions
    progress: StoredProgress | None
    result: dict[str, object] | None
    error: str | None


def answer(row: NarrowingRow, state: NarrowState) -> Reduction | Extraction:
    """A narrowings row as the job shows it: its answer once there is one, else its options
    with the progress and best case so far."""
    options, found = row.options, row.result or {}
    if options.kind == EXTRACT:
        return Extraction.model_validate({
            "state": state, "environment": options.environment, "progress": row.progress,
            "error": row.error, "at": options.at, **found})
    best = (row.progress or {}).get("best") or {}
    return Reduction.model_validate({
        "state": state, "environment": options.environment, "progress": row.progress,
        "error": row.error, "oracle": options.oracle, "variant": options.variant,
        "budget_s": options.budget_s, **best, **found})
