"""Comparing a run's outputs with another's: the same, noise within a tolerance, or different.

Runs of a case with an `entry` (and scripts that call an imported model's entry) report each
output's shape, dtype, a SHA-256 of its bytes and a sample of its values (all of them up to
4096 elements, else 4096 evenly spaced ones); the comparison sees only those. Two outputs
are the same when their bytes are. Else, with shape and dtype equal, each sampled pair is
compared with the tolerance of the dtype below, numpy's |a - b| <= atol + rtol * |b|
(integers and booleans must be equal): NaN equals NaN, an infinity equals only itself (its
sign too), and NaN or an infinity against anything else is beyond any tolerance. Within
tolerance everywhere, the outputs are `noise` (release-to-release floating point: another
vectorisation, a fused multiply-add, a flushed denormal), with the largest errors; beyond it
anywhere, `differs` (a miscompile, a wrong lowering).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

# (rtol, atol) per floating dtype, as TVM's own tests use them.
TOLERANCE: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
    "float32": (1e-5, 1e-5),
    "float64": (1e-7, 1e-7),
}
EXACT = (0.0, 0.0)


class OutputComparison(BaseModel):
    """Whether two runs' outputs agree, and by how much they differ where they do not."""

    outputs: Literal["same", "noise", "differs"]
    max_abs_error: float | None = None  # over the sampled pairs whose values are finite
    max_rel_error: float | None = None  # against non-zero reference values
    mismatches: int = 0  # sampled elements beyond the tolerance
    # why they differ: "values", "non-finite" (only NaN or infinities disagree), "shape",
    # "dtype", "structure"
    reason: str = ""


# A None among a run's outputs (`(x + 1, None)` returned by the VM) holds nothing to compare, and
# a framework's reference leaves it out (images/harness/references.py).
_NOTHING = {"value": "None"}


def _leaves(outputs: Any) -> list[dict[str, Any]]:
    if isinstance(outputs, list):
        return [leaf for item in outputs for leaf in _leaves(item)]
    return [outputs] if isinstance(outputs, dict) and outputs != _NOTHING else []


def _value(item: float | str) -> float:
    return float(item)  # "nan", "inf" and "-inf" parse back


@dataclass
class _Errors:
    """What the sampled pairs of one or more outputs showed."""

    abs: float = 0.0
    rel: float = 0.0
    exact: bool = True  # every sampled pair equal
    finite_mismatches: int = 0
    nonfinite_mismatches: int = 0

    def add(self, x: float, y: float, rtol: float, atol: float) -> None:
        """One sampled pair, `y` the reference's."""
        if x == y or (math.isnan(x) and math.isnan(y)):
            return
        self.exact = False
        if not (math.isfinite(x) and math.isfinite(y)):
            self.nonfinite_mismatches += 1
            return
        diff = abs(x - y)
        self.abs = max(self.abs, diff)
        self.rel = max(self.rel, diff / abs(y)) if y else self.rel  # none against an exact 0
        self.finite_mismatches += diff > atol + rtol * abs(y)

    @property
    def mismatches(self) -> int:
        """Sampled elements beyond the tolerance."""
        return self.finite_mismatches + self.nonfinite_mismatches

    def comparison(self, bitwise: bool) -> OutputComparison:
        """The verdict: same (equal bytes, or equal samples where no hash tells), noise, differs."""
        if self.mismatches:
            reason = "values" if self.finite_mismatches else "non-finite"
            return OutputComparison(outputs="differs", reason=reason, max_abs_error=self.abs,
                                    max_rel_error=self.rel, mismatches=self.mismatches)
        verdict: Literal["same", "noise"] = "same" if bitwise else "noise"
        return OutputComparison(outputs=verdict, max_abs_error=self.abs, max_rel_error=self.rel)


def _compare_leaf(x: dict[str, Any], y: dict[str, Any], errors: _Errors) -> str | None:
    """Add one pair of outputs' samples to `errors`; the reason they differ outright, if so."""
    if "value" in x or "value" in y:  # not a tensor (a shape, a scalar): equal or not
        return None if x.get("value") == y.get("value") else "values"
    for key in ("shape", "dtype"):
        if x.get(key) != y.get(key):
            return key
    if not x.get("sample") or not y.get("sample"):
        # Results made before samples were recorded: only the bytes can be compared.
        return "values"
    rtol, atol = TOLERANCE.get(x.get("dtype", ""), EXACT)
    for a, b in zip(x["sample"], y["sample"], strict=False):
        errors.add(_value(a), _value(b), rtol, atol)
    return None


def compare_outputs(a: Any, b: Any) -> OutputComparison | None:
    """How `a` compares with `b` (the reference); None when either run has no outputs."""
    if a is None or b is None:
        return None
    left, right = _leaves(a), _leaves(b)
    if len(left) != len(right):
        return OutputComparison(outputs="differs", reason="structure")
    errors, bitwise = _Errors(), True
    for x, y in zip(left, right, strict=True):
        if x.get("sha256") is not None and x.get("sha256") == y.get("sha256"):
            continue
        reason = _compare_leaf(x, y, errors)
        if reason is not None:
            return OutputComparison(outputs="differs", reason=reason)
        # Equal samples of unequal bytes are noise; where a hash is missing, the samples tell.
        bitwise = bitwise and errors.exact and (x.get("sha256") is None or y.get("sha256") is None)
    return errors.comparison(bitwise)
