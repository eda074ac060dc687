"""A layer verdict's runs (tvmrepro/layers.py decides; docs/layers.md): each path is a sandboxed
run of its own, in the harness's layer mode (images/harness/layers.py), on the runtime and
with the limits of the run it explains.

What a path's events say: the optimisations the script as written ran, in order (its
`layer_kept` events that are optional: the cut points) and the passes that are pipelines
(`layer_container`); for a path that failed, where it was: inside a pass (its `layer_pass`
without a `layer_kept`), in code generation (`layer_codegen` after the last pass), or as
the result's stage says (frontend, run).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tvmrepro.layers import DEFAULT, cut_name, path_of, reference_path, verdict
from tvmrepro.results import FAILING, LayerPath, LayerVerdict, Result
from worker.runtimes.events import Event

# Runs a path: the harness options of the layer mode -> the path's result and events.
RunPath = Callable[[dict[str, Any]], tuple[Result, list[Event]]]
_RUN_STAGES = ("vm_init", "run")


def cut_plan(events: list[Event]) -> tuple[list[str], list[str]]:
    """The optimisations the listing path ran, in order (the one it failed in last), and the
    passes that are pipelines."""
    passes: list[str] = []
    containers: set[str] = set()
    running: list[Event] = []
    for event in events:
        kind = event["event"]
        if kind == "layer_container":
            containers.add(str(event.get("name") or ""))
        elif kind == "layer_pass":
            running.append(event)
        elif kind == "layer_kept" and running:
            running.pop()
            if event.get("optional"):
                passes.append(str(event.get("name") or ""))
    failed = running[-1] if running else None
    if failed is not None and failed.get("optional") and failed.get("name") not in containers:
        passes.append(str(failed.get("name") or ""))
    return passes, sorted(containers)


def _where_in_build(events: list[Event]) -> str:
    """Where a failure inside a build or a script's pass was: the innermost pass still
    running, else the code generation if it began after the last pass, else the build."""
    running: list[str] = []
    codegen = False
    for event in events:
        kind = event["event"]
        if kind == "layer_pass":
            running.append(str(event.get("name") or ""))
            codegen = False
        elif kind == "layer_kept" and running:
            running.pop()
        elif kind == "layer_codegen":
            running, codegen = [], True
    if running:
        return f"pass:{running[-1]}"
    return "codegen" if codegen else "build"


def failed_in(result: Result, events: list[Event]) -> str | None:
    """Where a failing path stopped: frontend, pass:<Name>, codegen, build, run, or check (the
    model ran and returned; what failed came after it, in the script's own check)."""
    if result.status not in FAILING:
        return None
    stage = result.stage or ""
    if stage in _RUN_STAGES:
        returned = result.outputs is not None and result.status.value == "error"
        return "check" if returned else "run"
    if stage == "build" or stage.startswith("pass:"):
        return _where_in_build(events)
    return stage or None


def place_layer(result: Result, events: list[Event], run_path: RunPath,
                budget_s: float) -> LayerVerdict:
    """The layer verdict of a run made with its case's `layer` on (its events list the cuts):
    the other paths run through `run_path` as the search needs them, none started once
    `budget_s` is spent (a worker holds the run meanwhile: the case's time limit bounds it)."""
    passes, containers = cut_plan(events)
    started = time.monotonic()
    ran = [result]

    def probe(keep: int) -> LayerPath | None:
        if time.monotonic() - started > budget_s:
            return None
        found, said = run_path({"mode": "layer", "keep": keep, "containers": containers})
        ran.append(found)
        return path_of(cut_name(keep, passes), found, failed_in(found, said))

    def reference() -> LayerPath | None:  # the first path's that made a VM call
        return next((said for said in map(reference_path, ran) if said is not None), None)

    return verdict(path_of(DEFAULT, result, failed_in(result, events)), passes, probe,
                   reference, lambda: time.monotonic() - started)
