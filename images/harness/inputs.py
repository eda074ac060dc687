"""Seeded inputs shaped by a Relax function's signature, and a summary of its outputs."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

DEFAULT_SHAPE_VAR = 4
# Outputs are compared across releases by value, not only by hash: a sample of this
# many elements at evenly spaced positions (all of them for a small output).
SAMPLE_SIZE = 4096


def param_type(param: Any) -> Any:
    """A parameter's type (`ty` since 0.26, `struct_info` before)."""
    return getattr(param, "ty", None) or getattr(param, "struct_info", None)


def var_name(var: Any) -> str:
    """A Relax variable's name (`name` since 0.26, `name_hint` before)."""
    name = getattr(var, "name", None)
    return str(name if isinstance(name, str) else var.name_hint)


def dim_value(dim: Any, shape_vars: dict[str, int]) -> int:
    """A dimension's size: its constant, else the shape variable's value (default 4)."""
    value = getattr(dim, "value", None)
    if isinstance(value, int):
        return value
    return shape_vars.get(str(dim), DEFAULT_SHAPE_VAR)


def _array(info: Any, rng: np.random.RandomState, shape_vars: dict[str, int]) -> np.ndarray:
    shape = tuple(dim_value(d, shape_vars) for d in info.shape)
    dtype = str(info.dtype)
    if dtype.startswith("float") or dtype.startswith("bfloat"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.randint(0, 2, shape).astype(bool)
    return rng.randint(0, 10, shape).astype(dtype)


def make_inputs(tvm: Any, func: Any, device: Any, seed: int, shape_vars: dict[str, int]) -> list:
    """One TVM tensor per tensor parameter of `func`, from numpy's seeded generator."""
    rng = np.random.RandomState(seed)
    to_tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    args = []
    for param in func.params:
        info = param_type(param)
        if info is None or getattr(info, "shape", None) is None:
            raise TypeError(f"cannot generate an input for parameter {var_name(param)}: {info}")
        args.append(to_tensor(_array(info, rng, shape_vars), device))
    return args


def summarize(value: Any) -> Any:
    """Shape, dtype and checksums of an output (recursively for tuples)."""
    if hasattr(value, "numpy"):
        array = value.numpy()
        flat = np.ascontiguousarray(array).reshape(-1)
        sample = flat[:: max(1, -(-flat.size // SAMPLE_SIZE))].astype(np.float64)
        return {
            "shape": list(array.shape),
            "dtype": str(array.dtype),
            "sha256": hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest(),
            "sum": float(np.asarray(array, dtype=np.float64).sum()),
            # JSON has no NaN or infinity: they are written as strings.
            "sample": [v if np.isfinite(v) else str(v) for v in sample.tolist()],
        }
    if isinstance(value, list | tuple) or type(value).__name__ in ("Array", "ADT", "Tuple"):
        return [summarize(item) for item in value]
    return {"value": str(value)}
