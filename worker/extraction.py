"""Extract: from a script that fails at a pass, the build or VM creation, the module-mode case.

The script runs once in the harness's extract mode (harness/extract.py), which
reports every top-level pass and build with the module that entered it and the
pass whose output that module is. The case starts where the chain of passes
that led to the failing step starts (the module as the script made it), with
those passes in order; `at="failing"` starts at the failing step itself, and
`at="inner"` at the innermost pass that raised (also the default when the
failing step is a pass pipeline that a case cannot name). The
case is then run as it is: it reproduces the script only if it gives the same
signature, and the answer says whether it did.
"""

from __future__ import annotations

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


def chain(step: dict[str, Any], steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The passes whose outputs led, one into the next, to the module that entered `step`."""
    by_index = {s["index"]: s for s in steps}
    found: list[dict[str, Any]] = []
    link = step.get("link")
    while link is not None and link in by_index:
        found.insert(0, by_index[link])
        link = by_index[link].get("link")
    return found


def case_from_steps(script: Case, result: dict[str, Any], steps: list[dict[str, Any]],
                    at: str = "chain", inner: dict[str, Any] | None = None,
                    ) -> tuple[dict[str, Any], list[str]]:
    """The module-mode case for the failing step, and notes on what it could not carry."""
    failing = failing_step(result, steps)
    # A failing pass that a case cannot name (a pipeline) is replaced by the pass inside it.
    unnamed = failing["kind"] == "pass" and not failing.get("resolvable", True)
    if inner is not None and (at == "inner" or unnamed):
        failing, at = {**inner, "link": None}, "failing"
    passes = [] if at == "failing" else chain(failing, steps)
    start = passes[0] if passes else failing
    if failing["kind"] == "pass":
        passes.append(failing)
    build = failing if failing["kind"] == "build" else None
    notes = [f"arguments {', '.join(s['dropped_args'])} of {s['name']} are not JSON: left out"
             for s in passes if s.get("dropped_args")]
    case = {
        "title": f"{script.title or 'script'}: extracted at {result['stage']}",
        "source": start["ir"],
        "module": "Module",
        "variants": [{"name": EXTRACTED_VARIANT, "passes": [_pass_spec(s) for s in passes]}],
        "target": build.get("target") if build else None,
        "opt_level": min(max(int(failing.get("opt_level", 3)), 0), 4),
        "entry": None,
        "timeout_s": script.timeout_s,
        "memory_mb": script.memory_mb,
    }
    return case, notes


def record_script(script: Case, env: Environment, runtime: Runtime, job_id: str = "local",
                  ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """Run the script in extract mode: its result, its recorded steps, the innermost failing pass."""
    data = harness_case(script, env)
    data["harness"] = {"mode": "extract"}
    job = SandboxJob(run_id=uuid.uuid4().hex, job_id=job_id, env=env, case=data,
                     variant=script.variant_names[0])
    execution = runtime.execute(job)
    steps = [{k: v for k, v in e.items() if k != "event"}
             for e in execution.events if e["event"] == "extract_step"]
    inner = next(({k: v for k, v in e.items() if k != "event"}
                  for e in reversed(execution.events) if e["event"] == "extract_inner"), None)
    return assemble_result(job, execution).to_json(), steps, inner


def extract(script: Case, env: Environment, runtime: Runtime, at: str = "chain",
            job_id: str = "local") -> dict[str, Any]:
    """Extract the case and run it: {"case", "signature", "stage", "reproduces", ...}."""
    if script.script is None:
        raise BadInput("SCRIPT", "extract takes a script (a .py file or a case with 'script')")
    result, steps, inner = record_script(script, env, runtime, job_id)
    data, notes = case_from_steps(script, result, steps, at, inner)
    case = parse_case(data)
    check = run_variant(case, EXTRACTED_VARIANT, env, runtime, job_id=job_id).to_json()
    return {
        "case": case.model_dump(mode="json"), "signature": result["signature"],
        "stage": result["stage"], "environment": env.id,
        "reproduces": check["signature"] == result["signature"],
        "case_run": {"status": check["status"], "stage": check["stage"],
                     "signature": check["signature"]},
        "notes": notes,
    }
