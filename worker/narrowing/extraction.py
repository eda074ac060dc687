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

The module must come back as the failing release parses it: the harness prints
each recorded module and parses the text back at once. Where it does not parse
(a PrimFunc whose buffer shapes name symbolic variables the printer does not
declare), the module comes from, in order: another release's printer (the
module's tvm.ir.save_json text loaded and printed there, then parsed here), or
the save_json text itself as the case's `module_json`. The answer's `module_from`
says which. A module that is not well formed is carried with its decorator's
check off (`@I.ir_module(check_well_formed=False)`), and the case's title and
notes say so. A build keeps the script's own options (`exec_mode`,
`relax_pipeline`, `tir_pipeline`) and the PassContext's config.
"""

from __future__ import annotations

import ast
import json
import uuid
from collections.abc import Iterator
from typing import cast

from tvmrepro.api.narrowed import CaseRun, Extracted
from tvmrepro.cases import JSON_MODULE_SOURCE, Case, parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.frontends import needs_frontends
from tvmrepro.jobs.narrow.logic import EXTRACTED_VARIANT
from tvmrepro.results import Result, Status
from worker.narrowing.extract_steps import (
    BuildFields,
    BuildOptions,
    CaseData,
    Checked,
    PassSpec,
    Recorded,
    Step,
    checked,
)
from worker.narrowing.frontend_inputs import (
    Captured,
    captured_event,
    containers_of,
    unoptimised_capture,
    with_inputs,
)
from worker.runner import assemble_result, harness_case, run_variant
from worker.runtimes.base import Runtime, SandboxJob
from worker.runtimes.events import Event

_MODULE_STAGES = ("build", "vm_init")
_FAILED = (Status.ERROR, Status.CRASH, Status.TIMEOUT, Status.OOM)


class CannotExtract(BadInput):
    """The script's failure is not at a step that has a module; the message says why."""

    def __init__(self, problem: str) -> None:
        super().__init__("SCRIPT", problem)


def failing_step(result: Result, steps: list[Step]) -> Step:
    """The recorded step where the script failed; CannotExtract saying why there is none."""
    status, stage = result.status.value, result.stage or ""
    if result.status not in _FAILED:
        raise CannotExtract(f"the script ends with status {status} on {result.environment}, "
                            "not with a failure: there is nothing to extract")
    kind = "pass" if stage.startswith("pass:") else "build" if stage in _MODULE_STAGES else None
    if kind is None:
        where = ("before any TVM pass, build or VM creation" if not steps
                 else "in a step that has no module (only a pass, the build or VM creation has one)")
        raise CannotExtract(f"the script fails at stage {stage or 'unknown'} {where}: "
                            f"{result.signature}")
    found = [s for s in steps if s["kind"] == kind]
    if not found or (kind == "pass" and steps[-1]["kind"] != "pass"):
        raise CannotExtract(f"the script fails at stage {stage}, but its module was not recorded")
    return found[-1]


def _build_fields(build: Step | None, failing: Step) -> tuple[BuildFields, list[str]]:
    """The case's build options and PassContext config, as the script had them."""
    fields: BuildFields = {}
    notes: list[str] = []
    options: BuildOptions = (build or {}).get("options") or {}
    if "relax_pipeline" in options:
        fields["relax_pipeline"] = options["relax_pipeline"]
    if "tir_pipeline" in options:
        fields["tir_pipeline"] = options["tir_pipeline"]
    if options.get("exec_mode") in (None, "bytecode", "compiled"):
        if "exec_mode" in options:
            fields["exec_mode"] = options["exec_mode"]
    else:
        notes.append(f"exec_mode {options['exec_mode']!r} is no mode a case can name: "
                     "left at bytecode")
    notes += [f"{key} was given as a Pass object, which a case cannot carry: left at 'default'"
              for key in options.get("unnamed", [])]
    config = failing.get("config") or {}
    if config:
        fields["pass_config"] = config
    return fields, notes


def _pass_spec(step: Step) -> PassSpec | str:
    return {"name": step["name"], "args": step["args"]} if step.get("args") else step["name"]


def spelled(step: Step, lenient: bool = False) -> list[Step] | None:
    """The passes a case names for this step: itself, or for a pipeline a case cannot name
    the passes run directly inside it (None when one of those cannot be named either;
    `lenient`: those left out, as long as one can be named)."""
    if step.get("resolvable", True):
        return [step]
    children = step.get("children") or []
    named = [c for c in children if c.get("resolvable")]
    return named if named and (lenient or len(named) == len(children)) else None


def chain(step: Step, steps: list[Step], lenient: bool = False) -> list[Step]:
    """The passes whose outputs led, one into the next, to the module that entered `step`
    (back to the first one, or to one that a case cannot name)."""
    by_index = {s["index"]: s for s in steps}
    found: list[Step] = []
    link = step.get("link")
    while (link is not None and link in by_index
           and spelled(by_index[link], lenient) is not None):
        found.insert(0, by_index[link])
        link = by_index[link].get("link")
    return found


def _failing_point(failing: Step, at: str, inner: Step | None,
                   lenient: bool) -> tuple[Step, str]:
    """Where the case starts: the failing step, or the innermost pass that raised inside it
    (asked for, or because the failing pipeline cannot be spelled out as passes)."""
    unnamed = failing["kind"] == "pass" and spelled(failing, lenient) is None
    if inner is not None and (at == "inner" or unnamed):
        return {**inner, "link": None}, "failing"
    if unnamed:
        raise CannotExtract(f"the script fails in {failing['name']}, which a case cannot name "
                            "as a pass, and no pass inside it was seen to raise")
    return failing, at


def case_from_steps(script: Case, result: Result, steps: list[Step], at: str = "chain",
                    inner: Step | None = None, lenient: bool = False) -> tuple[CaseData, list[str]]:
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
    build_fields, build_notes = _build_fields(build, failing)
    notes += build_notes
    title = f"{script.title or 'script'}: extracted at {result.stage}"
    if not start.get("well_formed", True):
        title += " (module not well formed)"
        notes.append("the module is not well formed (as the script's own passes left it): it is "
                     "carried with @I.ir_module(check_well_formed=False)")
    case: CaseData = {
        "title": title,
        "source": start["ir"],
        "module": "Module",
        "variants": [{"name": EXTRACTED_VARIANT, "passes": [_pass_spec(p) for p in passes]}],
        "target": build.get("target") if build else None,
        "opt_level": min(max(int(failing.get("opt_level", 3)), 0), 4),
        "entry": None,
        "timeout_s": script.timeout_s,
        "memory_mb": script.memory_mb,
        **build_fields,
    }
    if start.get("parse_error"):  # the fallbacks, for module_form to choose from
        case["parse_error"] = start["parse_error"]
        if start.get("ir_json"):
            case["module_json"] = start["ir_json"]
        case["start_step"] = [start.get("index", "inner"), start["name"]]
        for name in start.get("defined_as") or []:
            own = script_module_source(script.script or "", name)
            if own is not None:
                case["script_module"] = [name, own]
                break
    return case, notes


def script_module_source(script: str, name: str | None) -> str | None:
    """The script's own source of its top-level module class `name` (a name bound by an
    assignment may have been bound again since), after the script's imports, functions and
    classes before it."""
    if not name:
        return None
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError):
        return None
    lines = script.splitlines()

    def text(node: ast.stmt) -> str:
        decorators = getattr(node, "decorator_list", [])
        start = min([node.lineno] + [d.lineno for d in decorators])
        return "\n".join(lines[start - 1:node.end_lineno])

    for at, node in enumerate(tree.body):
        if isinstance(node, ast.ClassDef) and node.name == name:
            before = [n for n in tree.body[:at] if isinstance(
                n, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef)]
            out = ""
            for n in [*before, node]:
                gap = "\n" if isinstance(n, ast.Import | ast.ImportFrom) else "\n\n\n"
                out += (gap if out else "") + text(n)
            return out + "\n"
    return None


def _step(event: Event, *drop: str) -> Step:
    """An extraction event's fields as a step (its kind of event, and `drop`, left out)."""
    return cast(Step, {k: v for k, v in event.items() if k != "event" and k not in drop})


def record_script(script: Case, env: Environment, runtime: Runtime,
                  job_id: str = "local") -> Recorded:
    """Run the script in extract mode: its result, its recorded steps, the innermost failing pass."""
    if needs_frontends(script):  # torch, onnx: the script runs where they are installed
        env = env.with_frontends()
    data = harness_case(script, env)
    data["harness"] = {"mode": "extract"}
    job = SandboxJob(run_id=uuid.uuid4().hex, job_id=job_id, env=env, case=data,
                     variant=script.variant_names[0])
    execution = runtime.execute(job)
    steps = [_step(e) for e in execution.events if e["event"] == "extract_step"]
    by_index = {s.get("index"): s for s in steps}
    for event in execution.events:
        if event["event"] == "extract_child" and event.get("parent") in by_index:
            parent = by_index[event.get("parent")]
            parent.setdefault("children", []).append(_step(event, "parent"))
    inner = next((_step(e) for e in reversed(execution.events)
                  if e["event"] == "extract_inner"), None)
    for event in execution.events:  # each module's parse-back, reported after the script
        if event["event"] == "extract_module":
            index = event.get("index")
            target = inner if index == "inner" else (
                by_index.get(index) if isinstance(index, int) else None)
            if target is not None:
                target.update(_step(event, "index"))
    return Recorded(assemble_result(job, execution), steps, inner,
                    captured_event(execution.events), containers_of(execution.events))


def extract(script: Case, env: Environment, runtime: Runtime, at: str = "chain",
            job_id: str = "local") -> Extracted:
    """Extract the case and run it: the case, the script's signature and stage, and whether
    the case reproduces it."""
    if script.script is None:
        raise BadInput("SCRIPT", "extract takes a script (a .py file or a case with 'script')")
    return extract_recorded(script, env, runtime, record_script(script, env, runtime, job_id),
                            at, job_id)


def extract_recorded(script: Case, env: Environment, runtime: Runtime, recorded: Recorded,
                     at: str = "chain", job_id: str = "local") -> Extracted:
    """Extract the case from the script's recorded run (record_script), and run it."""
    result, steps, inner = recorded.result, recorded.steps, recorded.inner
    found: Extracted | None = None
    frontend = needs_frontends(script)
    captured = _captured(script, env, runtime, recorded, job_id) if frontend else None
    for attempt in _attempts(script, result, steps, at, inner):
        data, notes = attempt
        if frontend:  # a frontend script: its inputs and reference, as files
            data, more = with_inputs(data, captured)
            notes = notes + more
        for case, module_from in module_forms(script, data, env, runtime, job_id):
            check = run_variant(case, EXTRACTED_VARIANT, env, runtime, job_id=job_id)
            answer = Extracted(
                case=case, signature=result.signature,
                stage=result.stage, environment=env.id,
                reproduces=check.signature == result.signature,
                case_run=CaseRun(status=check.status.value, stage=check.stage,
                                 signature=check.signature),
                notes=notes + ([] if module_from == f"printed by {env.id}"
                               else [f"the module: {module_from}"]),
                module_from=module_from)
            found = found or answer
            if answer.reproduces:
                return answer
    assert found is not None  # _attempts yields at least one case or raises
    return found


def _captured(script: Case, env: Environment, runtime: Runtime, recorded: Recorded,
              job_id: str) -> Captured | None:
    """A frontend script's entry inputs: from its own VM call, else from its unoptimised path
    (None: neither reached the VM)."""
    if recorded.captured is not None:
        return Captured(recorded.captured, "in its own run")
    if not any(s.get("imported_by") for s in recorded.steps):
        return None  # the failing chain does not start at an imported module
    event = unoptimised_capture(script, env.with_frontends(), runtime, recorded.containers,
                                job_id)
    return Captured(event, "on its unoptimised path (the imported module built with its "
                           "lowering alone)") \
        if event is not None else None


def _attempts(script: Case, result: Result, steps: list[Step], at: str,
              inner: Step | None) -> list[tuple[CaseData, list[str]]]:
    """The cases to try, best first: as asked; leaving out a pipeline's passes that a case
    cannot name; from the innermost pass that raised. Each distinct case once."""
    tries = [(at, False), (at, True), ("inner", False)] if inner else [(at, False), (at, True)]
    cases: dict[str, tuple[CaseData, list[str]]] = {}
    for where, lenient in tries:
        try:
            data, notes = case_from_steps(script, result, steps, where, inner, lenient)
        except CannotExtract:
            if not cases and (where, lenient) == tries[-1]:
                raise
            continue
        cases.setdefault(json.dumps(data, sort_keys=True), (data, notes))
    return list(cases.values())


def module_forms(script: Case, data: CaseData, env: Environment, runtime: Runtime,
                 job_id: str = "local") -> Iterator[tuple[Case, str]]:
    """The case with a module that parses on `env`, and where that module came from, best
    first: the failing release's printer; another release's printer (one per minor release,
    the newest first: the module's save_json text loaded there, or else the script run there
    in extract mode and the same step's module taken); that text as `module_json`; the
    script's own source of the module. Each is tried until one reproduces."""
    data = data.copy()
    problem = data.pop("parse_error", None)
    own = data.pop("script_module", None)
    text = data.pop("module_json", None)
    step = data.pop("start_step", None)
    if problem is None:
        yield parse_case(data), f"printed by {env.id}"
        return
    for other in printer_environments(env):
        try:
            printed = (check_sources(data, other, runtime, [{"json": text}], job_id)[0] if text
                       else _printed_there(script, other, runtime, step, job_id))
            if not printed.get("ok"):
                continue
            here = check_sources(data, env, runtime, [printed.get("source", "")], job_id)[0]
        except Exception:  # noqa: BLE001  (an environment this runtime cannot run: the next)
            continue
        if here.get("ok"):
            yield (parse_case({**data, "source": printed.get("source")}),
                   f"printed by {other.id} (the TVMScript {env.id} prints does not parse "
                   f"back: {problem})")
            break
    if text:
        yield (parse_case({**data, "source": JSON_MODULE_SOURCE, "module_json": text}),
               f"tvm.ir.save_json on {env.id} (the TVMScript {env.id} prints does not parse "
               f"back: {problem})")
    if own is not None:
        yield (parse_case({**data, "module": own[0], "source": own[1]}),
               f"the script's own source of {own[0]} (the TVMScript {env.id} prints does not "
               f"parse back: {problem})")
    yield parse_case(data), f"printed by {env.id}, though it does not parse back: {problem}"


def _printed_there(script: Case, other: Environment, runtime: Runtime,
                   step: list[int | str] | None, job_id: str) -> Checked:
    """The script run on `other` in extract mode: the same step's module as `other` prints
    it, if that parses back there (as a check gives it)."""
    if not step:
        return {"ok": False, "reason": "no step to find"}
    recorded = record_script(script, other, runtime, job_id)
    steps, inner = recorded.steps, recorded.inner
    index, name = step
    found = inner if index == "inner" else next(
        (s for s in steps if s.get("index") == index and s.get("name") == name), None)
    if found is None or found.get("name") != name or found.get("parse_error"):
        return {"ok": False, "reason": f"{other.id} printed no such step that parses back"}
    return {"ok": True, "source": found.get("ir", "")}


def printer_environments(env: Environment) -> list[Environment]:
    """The other releases whose printer may give a module that parses: the newest of each
    minor release (besides env's own), newest first, on env's device."""
    newest: dict[tuple[int, int], Environment] = {}
    for other in default_catalog().environments:  # in version order: the last one wins
        if other.device == env.device and other.id != env.id:
            newest[(other.version.major, other.version.minor)] = other
    own = (env.version.major, env.version.minor)
    return [e for minor, e in reversed(newest.items()) if minor != own]


def check_sources(data: CaseData, env: Environment, runtime: Runtime,
                  sources: list[str | dict[str, str]], job_id: str = "local") -> list[Checked]:
    """The harness's check mode on `env`: for each source (TVMScript, or {"json": text}),
    whether it parses there, and the module printed back."""
    case = harness_case(parse_case({k: v for k, v in data.items() if k != "module_json"}
                                   | {"source": data.get("source") or JSON_MODULE_SOURCE}), env)
    case["harness"] = {"mode": "check", "sources": sources}
    job = SandboxJob(run_id=uuid.uuid4().hex, job_id=job_id, env=env, case=case,
                     variant=EXTRACTED_VARIANT)
    execution = runtime.execute(job)
    got = [checked(e) for e in execution.events if e["event"] == "checked"]
    missing: Checked = {"ok": False, "reason": "the check did not finish"}
    return got + [missing] * (len(sources) - len(got))
