"""Extract: from a script that fails at a pass, the build or VM creation, the module-mode case.

The script runs once in the harness's extract mode (harness/extract.py), which
reports every top-level pass and build with the module that entered it and the
pass whose output that module is. The case starts where the chain of passes
that led to the failing step starts (the module as the script made it), with
those passes in order; `at="failing"` starts at the failing step itself, and
`at="inner"` at the innermost pass that raised. A pipeline that a case cannot
name as a pass (`relax.get_default_pipeline(...)`) is spelled out as the
passes that ran directly inside it; where one of those cannot be named
either, the case starts at the innermost pass that raised. The
case is then run as it is: it reproduces the script only if it gives the same
signature, and the answer says whether it did.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from tvmrepro.cases import Case, parse_case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.results import Status
from worker.runner import assemble_result, harness_case, run_variant
from worker.runtimes.base import Runtime, SandboxJob

EXTRACTED_VARIANT = "extracted"
_MODULE_STAGES = ("build", "vm_init")
_FAILED = (Status.ERROR, Status.CRASH, Status.TIMEOUT, Status.OOM)


class CannotExtract(BadInput):
    """The script's failure is not at a step that has a module; the message says why."""

    def __init__(self, problem: str) -> None:
        super().__init__("SCRIPT", problem)


def failing_step(result: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The recorded step where the script failed; CannotExtract saying why there is none."""
    status, stage = result["status"], result.get("stage") or ""
    if Status(status) not in _FAILED:
        raise CannotExtract(f"the script ends with status {status} on {result['environment']}, "
                            "not with a failure: there is nothing to extract")
    kind = "pass" if stage.startswith("pass:") else "build" if stage in _MODULE_STAGES else None
    if kind is None:
        where = ("before any TVM pass, build or VM creation" if not steps
                 else "in a step that has no module (only a pass, the build or VM creation has one)")
        raise CannotExtract(f"the script fails at stage {stage or 'unknown'} {where}: "
                            f"{result.get('signature')}")
    found = [s for s in steps if s["kind"] == kind]
    if not found or (kind == "pass" and steps[-1]["kind"] != "pass"):
        raise CannotExtract(f"the script fails at stage {stage}, but its module was not recorded")
    return found[-1]


def _pass_spec(step: dict[str, Any]) -> dict[str, Any] | str:
    return {"name": step["name"], "args": step["args"]} if step.get("args") else step["name"]


def spelled(step: dict[str, Any], lenient: bool = False) -> list[dict[str, Any]] | None:
    """The passes a case names for this step: itself, or for a pipeline a case cannot name
    the passes run directly inside it (None when one of those cannot be named either;
    `lenient`: those left out, as long as one can be named)."""
    if step.get("resolvable", True):
        return [step]
    children = step.get("children") or []
    named = [c for c in children if c.get("resolvable")]
    return named if named and (lenient or len(named) == len(children)) else None


def chain(step: dict[str, Any], steps: list[dict[str, Any]],
          lenient: bool = False) -> list[dict[str, Any]]:
    """The passes whose outputs led, one into the next, to the module that entered `step`
    (back to the first one, or to one that a case cannot name)."""
    by_index = {s["index"]: s for s in steps}
    found: list[dict[str, Any]] = []
    link = step.get("link")
    while (link is not None and link in by_index
           and spelled(by_index[link], lenient) is not None):
        found.insert(0, by_index[link])
        link = by_index[link].get("link")
    return found


def _failing_point(failing: dict[str, Any], at: str, inner: dict[str, Any] | None,
                   lenient: bool) -> tuple[dict[str, Any], str]:
    """Where the case starts: the failing step, or the innermost pass that raised inside it
    (asked for, or because the failing pipeline cannot be spelled out as passes)."""
    unnamed = failing["kind"] == "pass" and spelled(failing, lenient) is None
    if inner is not None and (at == "inner" or unnamed):
        return {**inner, "link": None}, "failing"
    if unnamed:
        raise CannotExtract(f"the script fails in {failing['name']}, which a case cannot name "
                            "as a pass, and no pass inside it was seen to raise")
    return failing, at


def case_from_steps(script: Case, result: dict[str, Any], steps: list[dict[str, Any]],
                    at: str = "chain", inner: dict[str, Any] | None = None,
                    lenient: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The module-mode case for the failing step, and notes on what it could not carry
    (`lenient`: a pipeline's passes that a case cannot name are left out)."""
    failing, at = _failing_point(failing_step(result, steps), at, inner, lenient)
    chained = [] if at == "failing" else chain(failing, steps, lenient)
    start = chained[0] if chained else failing
    if failing["kind"] == "pass":
        chained.append(failing)
    passes = [p for step in chained for p in spelled(step, lenient) or []]
    build = failing if failing["kind"] == "build" else None
    notes = [f"arguments {', '.join(p['dropped_args'])} of {p['name']} are not JSON: left out"
             for p in passes if p.get("dropped_args")]
    notes += [f"{c['name']} (in {step['name']}) is no pass a case can name: left out"
              for step in chained for c in step.get("children") or []
              if not step.get("resolvable", True) and not c.get("resolvable")]
    case = {
        "title": f"{script.title or 'script'}: extracted at {result['stage']}",
        "source": start["ir"],
        "module": "Module",
        "variants": [{"name": EXTRACTED_VARIANT, "passes": [_pass_spec(p) for p in passes]}],
        "target": build.get("target") if build else None,
        "opt_level": min(max(int(failing.get("opt_level", 3)), 0), 4),
        "entry": None,
        "timeout_s": script.timeout_s,
        "memory_mb": script.memory_mb,
    }
    return case, notes


# The script's result, its recorded steps, and the innermost pass that raised.
Recorded = tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]


def record_script(script: Case, env: Environment, runtime: Runtime,
                  job_id: str = "local") -> Recorded:
    """Run the script in extract mode: its result, its recorded steps, the innermost failing pass."""
    data = harness_case(script, env)
    data["harness"] = {"mode": "extract"}
    job = SandboxJob(run_id=uuid.uuid4().hex, job_id=job_id, env=env, case=data,
                     variant=script.variant_names[0])
    execution = runtime.execute(job)
    steps = [{k: v for k, v in e.items() if k != "event"}
             for e in execution.events if e["event"] == "extract_step"]
    by_index = {s["index"]: s for s in steps}
    for event in execution.events:
        if event["event"] == "extract_child" and event["parent"] in by_index:
            child = {k: v for k, v in event.items() if k not in ("event", "parent")}
            by_index[event["parent"]].setdefault("children", []).append(child)
    inner = next(({k: v for k, v in e.items() if k != "event"}
                  for e in reversed(execution.events) if e["event"] == "extract_inner"), None)
    return assemble_result(job, execution).to_json(), steps, inner


def extract(script: Case, env: Environment, runtime: Runtime, at: str = "chain",
            job_id: str = "local") -> dict[str, Any]:
    """Extract the case and run it: {"case", "signature", "stage", "reproduces", ...}."""
    if script.script is None:
        raise BadInput("SCRIPT", "extract takes a script (a .py file or a case with 'script')")
    return extract_recorded(script, env, runtime, record_script(script, env, runtime, job_id),
                            at, job_id)


def extract_recorded(script: Case, env: Environment, runtime: Runtime, recorded: Recorded,
                     at: str = "chain", job_id: str = "local") -> dict[str, Any]:
    """Extract the case from the script's recorded run (record_script), and run it."""
    result, steps, inner = recorded
    found: dict[str, Any] | None = None
    for attempt in _attempts(script, result, steps, at, inner):
        case, notes = attempt
        check = run_variant(case, EXTRACTED_VARIANT, env, runtime, job_id=job_id).to_json()
        answer = {
            "case": case.model_dump(mode="json"), "signature": result["signature"],
            "stage": result["stage"], "environment": env.id,
            "reproduces": check["signature"] == result["signature"],
            "case_run": {"status": check["status"], "stage": check["stage"],
                         "signature": check["signature"]},
            "notes": notes,
        }
        found = found or answer
        if answer["reproduces"]:
            return answer
    assert found is not None  # _attempts yields at least one case or raises
    return found


def _attempts(script: Case, result: dict[str, Any], steps: list[dict[str, Any]], at: str,
              inner: dict[str, Any] | None) -> list[tuple[Case, list[str]]]:
    """The cases to try, best first: as asked; leaving out a pipeline's passes that a case
    cannot name; from the innermost pass that raised. Each distinct case once."""
    tries = [(at, False), (at, True), ("inner", False)] if inner else [(at, False), (at, True)]
    cases: dict[str, tuple[Case, list[str]]] = {}
    for where, lenient in tries:
        try:
            data, notes = case_from_steps(script, result, steps, where, inner, lenient)
        except CannotExtract:
            if not cases and (where, lenient) == tries[-1]:
                raise
            continue
        cases.setdefault(json.dumps(data, sort_keys=True), (parse_case(data), notes))
    return list(cases.values())
