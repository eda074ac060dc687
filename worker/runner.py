"""Run one case variant in one environment through a runtime, and make the Result.

The status is decided here from what the runtime observed (the case's exit
status and signal, as its supervisor saw them, the time, the memory events).
What the run says of itself (stage, passes, IR, outputs, message, even its
status) are claims: a `result` event counts only from a run that then exited
0 within its time; the TVM version comes from the environment's fingerprint.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from typing import Any, TypedDict

from pydantic import ValidationError

from tvmrepro.attachments import WITH_CONTENTS, require_contents
from tvmrepro.cases import Case
from tvmrepro.environments import Environment
from tvmrepro.frontends import needs_frontends
from tvmrepro.results import FunctionInfo, Log, PassRecord, Result, Status
from worker.crashes import crash_frames
from worker.environments.health import defect
from worker.layers import place_layer
from worker.runtimes.base import Execution, Runtime, SandboxJob
from worker.runtimes.events import Event

# How a run that ended without a result event reads, by why it ended.
_KILLED_BY_US = "the run exceeded its time limit of {limit} s and was killed"
_EXITED = "the process exited with status {rc} before the harness could report"
_HARNESS_FAILED = "the harness ended with exit status {rc} before it could start the case"
SHORT_TEXT_CAP = 128  # a stage or a pass name, as the store keeps it
# Statuses only the runtime observes: a run that claims one of them is not believed.
_OBSERVED_ONLY = (Status.CRASH, Status.TIMEOUT)
# A memory failure counts as `oom` only with evidence (oom_evidence); short of it, a peak this
# far below the limit makes a MemoryError or an allocator abort the case's own error.
OOM_PEAK_SHARE = 0.5
# Or its address space (what RLIMIT_AS limits: a case forked from a process that imported TVM
# starts with much of it taken) came within this much of the limit: the next mapping failed.
AS_MARGIN_KB = 64 << 10
# What one run may store (the store keeps every run; a 500-run job is 500 times this). The
# passes' records beyond MAX_PASSES, the IR past a pass's or the run's cap and the function
# entries past theirs are not kept; a text field past TEXT_CAP is clipped. Each cut is marked.
MAX_PASSES = 1000
PASS_IR_CAP = 2 << 20  # characters of one pass's IR
RUN_IR_CAP = 8 << 20  # characters of IR of all of a run's passes
PASS_FUNCTIONS_CAP = 1000  # function entries of one pass's table
RUN_FUNCTIONS_CAP = 8000  # function entries of all of a run's tables
ATTRS_CAP = 4096  # characters of one function's attrs (as JSON), else none are kept
TEXT_CAP = 64 << 10  # a message, a signature, a reproducer line... : characters
REPRODUCER_CAP = 1 << 20
OUTPUTS_CAP = 2 << 20  # characters of a run's outputs (as JSON), else none are kept
IR_NOT_KEPT = "# (IR not stored: past this run's cap of {cap} characters of IR)\n"
IR_CLIPPED = "\n# (IR clipped: past the cap of {cap} characters for one pass)\n"


class Outcome(TypedDict, total=False):
    """A result's fields that say how its run ended: what the run claimed, judged, or what
    the runtime observed of a run that gave no result."""

    status: Status
    stage: str | None
    pass_path: list[str] | None
    error_type: str | None
    message: str | None
    signature: str | None
    signature_frame: str | None
    signature_message: str | None
    signal: str | None
    outputs: object
    reference_outputs: object
    reference_kind: str | None
    reference_note: str | None
    reference_error: str | None
    native_frames: list[str] | None
    environment_defect: str | None


def harness_case(case: Case, env: Environment) -> dict[str, Any]:
    """The case as the harness reads it: plain JSON, target defaulted by the environment, its
    files with their contents (BadInput: one's is not at hand)."""
    require_contents(case)
    data = case.model_dump(mode="json", context=WITH_CONTENTS)
    data["target"] = case.target or env.target
    return data


def run_variant(case: Case, variant: str, env: Environment, runtime: Runtime,
                run_id: str | None = None, job_id: str = "local") -> Result:
    """Run `variant` of `case` in `env` and classify what happened."""
    case.variant(variant)  # BadInput for an unknown variant
    if needs_frontends(case):  # torch, onnx: the environment's frontend flavour (same id)
        env = env.with_frontends()
    job = SandboxJob(run_id=run_id or uuid.uuid4().hex, job_id=job_id, env=env,
                     case=harness_case(case, env), variant=variant)
    execution = runtime.execute(job)
    result = assemble_result(job, execution)
    if case.layer:  # where the failure first shows: more runs of the same script (layers.py)
        found = place_layer(result, execution.events, lambda harness: _path(job, runtime, harness),
                            budget_s=job.timeout_s)
        result = result.model_copy(update={"layer": found})
    return result


def _path(job: SandboxJob, runtime: Runtime, harness: dict[str, Any]) -> tuple[Result, list[Event]]:
    """One path of a layer verdict: the job's case in the harness's layer mode, run alike."""
    path = dataclasses.replace(job, run_id=uuid.uuid4().hex, case={**job.case, "harness": harness})
    execution = runtime.execute(path)
    return assemble_result(path, execution), execution.events


def oracle_view(result: Result) -> dict[str, Any]:
    """A result as the oracles judge it (tvmrepro.jobs.oracles.judge): without its passes, its log
    as the text `regex:` reads."""
    view = result.model_dump(mode="json", exclude={"log", "passes"})
    view["log_text"] = f"{result.log.stdout}\n{result.log.stderr}"
    return view


def _last(events: list[Event], kind: str) -> Event | None:
    return next((e for e in reversed(events) if e["event"] == kind), None)


def _outcome_without_result(job: SandboxJob, ex: Execution, started: bool) -> Outcome:
    """Why the harness gave no result: timeout, out of memory, a signal, or an exit."""
    if ex.timed_out:
        message = _KILLED_BY_US.format(limit=job.timeout_s)
        return {"status": Status.TIMEOUT, "error_type": "Timeout", "message": message}
    if ex.signal == "SIGXCPU":
        message = f"the run used more than its CPU time limit ({job.timeout_s} s)"
        return {"status": Status.TIMEOUT, "error_type": "Timeout", "message": message}
    # Out of memory only with evidence: an OOM kill observed, or TVM's allocator aborting
    # (std::bad_alloc) at the address-space limit. A SIGKILL by itself is a crash.
    if ex.oom_killed or (ex.signal == "SIGABRT" and "std::bad_alloc" in ex.stderr
                         and oom_evidence(job, ex) is not None):
        message = f"the run was killed for exceeding its memory limit of {job.memory_mb} MB"
        return {"status": Status.OOM, "error_type": "OutOfMemory", "message": message}
    if ex.signal:
        message = f"the process was killed by {ex.signal}"
        return {"status": Status.CRASH, "error_type": ex.signal, "message": message,
                "signal": ex.signal}
    if not started:  # the harness itself never got going: a fault of ours, not the case's
        message = _HARNESS_FAILED.format(rc=ex.returncode)
        return {"status": Status.INFRA_ERROR, "error_type": "HarnessFailed", "message": message}
    message = _EXITED.format(rc=ex.returncode)
    return {"status": Status.ERROR, "error_type": "Exit", "message": message}


def _usage(ex: Execution) -> Event:
    """The case's resource use as its supervisor measured it once the case ended (signed)."""
    return _last(ex.events, "usage") or _last(ex.events, "exit") or {"event": "usage"}


def peak_memory_mb(ex: Execution) -> float | None:
    """The case's peak resident memory, in MB (None: its supervisor never said)."""
    peak = _usage(ex).get("maxrss_kb")
    return peak / 1024 if isinstance(peak, int | float) and peak >= 0 else None


def oom_evidence(job: SandboxJob, ex: Execution) -> str | None:
    """What shows that this run ran out of memory, in words; None: nothing does.

    The runtime's own observation first: `Execution.oom_killed` is where a runtime says it saw
    the kernel's OOM kill (the engine's OOMKilled, a run cgroup's oom_kill event). Then the
    OOM kills the supervisor counted in the sandbox's memory cgroup, where it sees one. Last,
    the peak memory the supervisor measured: a MemoryError (or an allocator abort) is believed
    when the case's memory came near its limit, never from the case's word alone.
    """
    if ex.oom_killed:
        return "the runtime observed an OOM kill"
    kills = _usage(ex).get("oom_kills")
    if isinstance(kills, int) and kills > 0:
        return "the sandbox's memory cgroup counted an OOM kill"
    peak = peak_memory_mb(ex)
    if peak is not None and peak >= OOM_PEAK_SHARE * job.memory_mb:
        return f"a peak of {peak:.0f} MB against the limit of {job.memory_mb} MB"
    space, limit = _usage(ex).get("vm_peak_kb"), _usage(ex).get("as_limit_kb")
    if isinstance(space, int) and isinstance(limit, int) and space >= limit - AS_MARGIN_KB:
        return (f"its address space reached {space >> 10} MB against the limit of "
                f"{limit >> 10} MB")
    return None


def _judged_claims(job: SandboxJob, ex: Execution, fields: Outcome, started: bool) -> Outcome:
    """A result event's fields with the statuses that need evidence checked against it.

    `infra_error` is the service's word, never the run's: the harness says it only when TVM
    would not import before the case began, so it stands only where no `start` event came
    (the case never ran); otherwise the run raised: `error`. `oom` stands with oom_evidence.
    """
    status = fields["status"]
    if status in _OBSERVED_ONLY:
        return {**fields, "status": Status.ERROR}
    if status == Status.INFRA_ERROR and started:
        return {**fields, "status": Status.ERROR}
    if status == Status.OOM and oom_evidence(job, ex) is None:
        peak = peak_memory_mb(ex)
        said = (f"{fields.get('message') or ''} (not counted as out of memory: the run's peak "
                f"was {'unknown' if peak is None else f'{peak:.0f} MB'} against its limit of "
                f"{job.memory_mb} MB)").strip()
        return {**fields, "status": Status.ERROR, "message": said}
    return fields


def _text_or_none(value: Any, cap: int = TEXT_CAP) -> str | None:
    """A claimed text as the store keeps it: a string clipped to `cap`, else None."""
    if not isinstance(value, str):
        return None
    return value if len(value) <= cap else value[:cap] + "…[clipped]"


def _seconds(value: Any) -> float | None:
    """A claimed time: a finite number, else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _pass_path(value: Any) -> list[str] | None:
    """A claimed pass path (the passes running, outermost first), as the store keeps it."""
    if not isinstance(value, list):
        return None
    return [_text_or_none(name, SHORT_TEXT_CAP) or "" for name in value[:64]]


def _outputs_or_none(value: object) -> object:
    """Claimed outputs as the store keeps them: within OUTPUTS_CAP as JSON, else None."""
    return value if len(json.dumps(value, default=str)) <= OUTPUTS_CAP else None


def _claimed_fields(event: Event) -> Outcome:
    """A result event's fields, each of the type a result has (a claim of another type, or of
    an unknown status, must not make the run's result fail to validate: that would read as
    the service's fault)."""
    try:
        status = Status(event.get("status"))
    except ValueError:
        status = Status.ERROR
    return {"status": status, "stage": _text_or_none(event.get("stage")),
            "error_type": _text_or_none(event.get("error_type")),
            "message": _text_or_none(event.get("message")),
            "signature": _text_or_none(event.get("signature")),
            "signature_frame": _text_or_none(event.get("signature_frame")),
            "signature_message": _text_or_none(event.get("signature_message")),
            "pass_path": _pass_path(event.get("pass_path")),
            "outputs": _outputs_or_none(event.get("outputs")),
            "reference_outputs": _outputs_or_none(event.get("reference_outputs")),
            "reference_kind": _text_or_none(event.get("reference_kind"), SHORT_TEXT_CAP),
            "reference_note": _text_or_none(event.get("reference_note")),
            "reference_error": _text_or_none(event.get("reference_error"))}


def _pass_records(events: list[Event]) -> list[PassRecord]:
    """The run's pass events as records, within the run's caps (a malformed one is skipped)."""
    records: list[PassRecord] = []
    ir_left, functions_left = RUN_IR_CAP, RUN_FUNCTIONS_CAP
    for event in events:
        if event["event"] != "pass" or len(records) >= MAX_PASSES:
            continue
        said_ir, said_table = event.get("ir"), event.get("functions")
        ir: str = said_ir if isinstance(said_ir, str) else ""
        if len(ir) > PASS_IR_CAP:
            ir = ir[:PASS_IR_CAP] + IR_CLIPPED.format(cap=PASS_IR_CAP)
        if len(ir) > ir_left:
            ir = IR_NOT_KEPT.format(cap=RUN_IR_CAP)
        else:
            ir_left -= len(ir)
        table: list[object] = said_table if isinstance(said_table, list) else []
        functions: list[FunctionInfo] = []
        for entry in table[:min(PASS_FUNCTIONS_CAP, functions_left)]:
            if not isinstance(entry, dict):
                continue
            attrs = entry.get("attrs")
            if not isinstance(attrs, dict) or len(json.dumps(attrs, default=str)) > ATTRS_CAP:
                attrs = {}
            functions.append(FunctionInfo(
                name=_text_or_none(entry.get("name"), SHORT_TEXT_CAP) or "",
                kind=_text_or_none(entry.get("kind"), SHORT_TEXT_CAP) or "", attrs=attrs))
        functions_left -= len(functions)
        try:
            records.append(PassRecord.model_validate({
                "index": event.get("index"), "name": event.get("name"),
                "seconds": _seconds(event.get("seconds")) or 0.0, "functions": functions,
                "ir": ir}))
        except ValidationError:
            continue
    return records


def _reproducer(events: list[Event]) -> str | None:
    said = _last(events, "reproducer")
    return _text_or_none(said.get("text"), REPRODUCER_CAP) if said is not None else None


def ended_cleanly(ex: Execution) -> bool:
    """Whether the run exited 0, by no signal, within its time: only then is its result read."""
    return not ex.timed_out and ex.returncode == 0 and ex.signal is None and not ex.oom_killed


def assemble_result(job: SandboxJob, ex: Execution) -> Result:
    """Merge the harness's events with what the runtime saw."""
    events = ex.events
    result_event = _last(events, "result")
    started = _last(events, "start") is not None
    stage_event = _last(events, "stage")
    rewrites_event = _last(events, "rewrites")
    said_rewrites = rewrites_event.get("rewrites") if rewrites_event else None
    rewrites = [r[:SHORT_TEXT_CAP] for r in (said_rewrites if isinstance(said_rewrites, list)
                                             else []) if isinstance(r, str)][:100]
    passes = _pass_records(events)
    fields: Outcome
    if result_event and ended_cleanly(ex):
        fields = _claimed_fields(result_event)
        fields = _judged_claims(job, ex, fields, started=started)
    else:
        fields = _outcome_without_result(job, ex, started=started)
        fields["stage"] = _text_or_none(stage_event.get("stage") if stage_event else None,
                                        SHORT_TEXT_CAP)
        fields["pass_path"] = _pass_path(stage_event.get("pass_path") if stage_event else None)
        fields["signature"] = f"{fields['error_type']}: {fields['message']}"
        if fields["status"] == Status.CRASH:
            fields.update(crash_fields(ex))
    fields["environment_defect"] = defect(
        (ex.tvm or {}).get("health"), fields["status"], fields.get("stage"),
        fields.get("error_type"), fields.get("message"))
    seconds = {"total": round(ex.seconds, 3)}
    if result_event is not None:  # the harness's own time, and the entry call's
        said = {"harness": _seconds(result_event.get("harness_seconds")),
                "run": _seconds(result_event.get("run_seconds"))}
        seconds |= {key: value for key, value in said.items() if value is not None}
    return storable(Result(
        environment=job.env.id,
        variant=job.variant,
        rewrites=rewrites,
        reproducer=_reproducer(events),
        passes=passes,
        tvm=dict(ex.tvm) if ex.tvm is not None else None,
        frontends=frontend_pins(job.env),
        seconds=seconds,
        isolation=dict(ex.isolation),
        log=Log(stdout=ex.stdout, stderr=ex.stderr, truncated=ex.truncated),
        **fields,
    ))


def crash_fields(ex: Execution) -> Outcome:
    """A crash's signature, by its signal and, where the log holds TVM's native backtrace, the
    innermost TVM function in it (worker.crashes): `crash: SIGSEGV at ToJSONGraph`."""
    frames = crash_frames(ex.stderr)
    if not frames:
        return {"signature": f"crash: {ex.signal}", "native_frames": None}
    return {"signature": f"crash: {ex.signal} at {frames[0]}", "signature_frame": frames[0],
            "message": f"the process was killed by {ex.signal} in {frames[0]}",
            "native_frames": frames}


def frontend_pins(env: Environment) -> dict[str, str] | None:
    """The frameworks a frontend flavour's run had (its pins), None for a plain run."""
    if not env.frontends:
        return None
    return {name: pin for name, pin in sorted(env.frontend_packages.items())
            if name.replace("-", "_") in env.frontend_modules}


def text(value: str) -> str:
    """Valid text for any store: NUL and lone surrogates escaped (PostgreSQL refuses NUL)."""
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    try:
        value.encode()
    except UnicodeEncodeError:
        value = value.encode("utf-8", "backslashreplace").decode()
    return value


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {text(str(k)): _clean(v) for k, v in value.items()}
    return value


def storable(result: Result) -> Result:
    """The result with every text valid and the short fields clipped to what the store holds."""
    data = _clean(result.model_dump(mode="json"))
    if data.get("stage"):
        data["stage"] = data["stage"][:SHORT_TEXT_CAP]
    for record in data.get("passes") or []:
        record["name"] = record["name"][:SHORT_TEXT_CAP]
    return Result.model_validate(data)
