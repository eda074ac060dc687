"""Comparing a run's outputs with another's: the same, or different beyond a tolerance.

Runs of a case with an `entry` report each output's shape, dtype, a SHA-256 of
its bytes and a sample of its values (all of them up to 4096 elements, else
4096 evenly spaced ones). Two outputs are the same when their bytes are; else
when shape and dtype agree and every sampled pair is close in numpy's sense,
|a - b| <= atol + rtol * |b|, with the tolerance of the dtype below (integers
and booleans must be equal; NaN equals NaN). Release-to-release noise in
floating point (another vectorisation, a fused multiply-add) stays within the
tolerance; a miscompile does not.
"""

from __future__ import annotations

import math
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

    outputs: Literal["same", "differs"]
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    reason: str = ""  # why they differ: "values", "shape", "dtype", "structure"


def _leaves(outputs: Any) -> list[dict[str, Any]]:
    if isinstance(outputs, list):
        return [leaf for item in outputs for leaf in _leaves(item)]
    return [outputs] if isinstance(outputs, dict) else []


def _value(item: float | str) -> float:
    return float(item)  # "nan", "inf" and "-inf" parse back


def _errors(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float, bool]:
    """Max abs and rel error over the samples, and whether they are within tolerance."""
    rtol, atol = TOLERANCE.get(a.get("dtype", ""), EXACT)
    worst_abs = worst_rel = 0.0
    close = True
    for x, y in zip(a.get("sample") or [], b.get("sample") or [], strict=False):
        fx, fy = _value(x), _value(y)
        if fx == fy or (math.isnan(fx) and math.isnan(fy)):
            continue
        diff = abs(fx - fy)
        worst_abs = max(worst_abs, diff)
        worst_rel = max(worst_rel, diff / abs(fy) if fy else math.inf)
        close = close and diff <= atol + rtol * abs(fy)
    return worst_abs, worst_rel, close


def compare_outputs(a: Any, b: Any) -> OutputComparison | None:
    """How `a` compares with `b` (the reference); None when either run has no outputs."""
    if a is None or b is None:
        return None
    left, right = _leaves(a), _leaves(b)
    if len(left) != len(right):
        return OutputComparison(outputs="differs", reason="structure")
    worst_abs = worst_rel = 0.0
    for x, y in zip(left, right, strict=True):
        if x.get("sha256") is not None and x.get("sha256") == y.get("sha256"):
            continue
        for key in ("shape", "dtype"):
            if x.get(key) != y.get(key):
                return OutputComparison(outputs="differs", reason=key)
        if not x.get("sample") or not y.get("sample"):
            # Results made before samples were recorded: only the bytes can be compared.
            return OutputComparison(outputs="differs", reason="values")
        abs_err, rel_err, close = _errors(x, y)
        worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        if not close:
            return OutputComparison(outputs="differs", reason="values", max_abs_error=worst_abs,
                                    max_rel_error=worst_rel)
    return OutputComparison(outputs="same", max_abs_error=worst_abs, max_rel_error=worst_rel)
