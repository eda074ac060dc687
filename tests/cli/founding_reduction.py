"""The founding case's reduction as measured, step by step (the CLI's and the service's tests)."""

from __future__ import annotations

from typing import Any

from worker.narrowing.reduction import BUDGET_SPENT, CANCELLED

# The founding case's reduction (fusetir-once, tvm-0.27.0.post1-cpu) step by step, as measured.
# The reducer is deterministic (it takes the first edit in order that holds), so a reduction its
# budget cut short took the first of these.
PASSES_STEP = "passes 3 -> 2: LambdaLift, AllocateWorkspace"
FOUNDING_STEPS = ["reference: error at vm_init",
                  "drop function entry_b: 145 -> 138 lines",
                  "drop lines 26-126: 138 -> 36 lines",
                  "drop lines 10-16: 36 -> 29 lines",
                  "drop lines 10-13: 29 -> 25 lines",
                  "drop lines 10-11: 25 -> 23 lines",
                  "drop line 10: 23 -> 22 lines",
                  PASSES_STEP,
                  "empty body of attention: 22 -> 22 lines",
                  "zeros for gv_2 (line 21): 22 -> 21 lines",
                  "drop function attention: 21 -> 16 lines",
                  "shape extent 32 -> 1: 16 -> 16 lines",
                  "shape extent 16 -> 1: 16 -> 16 lines",
                  "shape extent 8 -> 1: 16 -> 16 lines"]


def founding_steps(found: dict[str, Any]) -> list[str]:
    """A founding-case reduction's log without its budget line: the first of FOUNDING_STEPS."""
    steps = [line for line in found["log"] if line not in (BUDGET_SPENT, CANCELLED)]
    known = min(len(steps), len(FOUNDING_STEPS))
    assert steps[:known] == FOUNDING_STEPS[:known], found["log"]
    return steps
