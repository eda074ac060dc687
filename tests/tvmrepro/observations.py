"""Run results as the bisection reads them: summaries, and observations of finished runs."""

from __future__ import annotations

from typing import Any

from tvmrepro.jobs.bisect.logic import Observation

ENVS = [f"e{n}" for n in range(8)]


def result(status: str, signature: str | None = None, **extra: Any) -> dict[str, Any]:
    """A run's result summary as the store holds it."""
    if signature is None and status not in ("ok", "incompatible"):
        signature = f"{status}: something"
    return {"status": status, "stage": None if status == "ok" else "vm_init",
            "signature": signature, **extra}


def observe(results: dict[str, list[dict[str, Any]] | dict[str, Any]]) -> list[Observation]:
    """Observations of finished runs: env -> result (or a list of repeats)."""
    found = []
    for env, value in results.items():
        for n, res in enumerate(value if isinstance(value, list) else [value]):
            found.append(Observation(env, f"{env}-{n}", res))
    return found
