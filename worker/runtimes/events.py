"""A run's events: what its supervisor signed (the harness's claims and its own measures),
verified and parsed once, as the runtimes read them back."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Required, TypedDict, cast


class Event(TypedDict, total=False):
    """One event of a run, as the supervisor signed it (images/harness/events.py writes the
    harness's). `event` names its kind, the other keys are that kind's:

    - the supervisor's own measures: `exit` (returncode, signal, and the usage keys) and
      `usage` (maxrss_kb, cpu_seconds, oom_kills, vm_peak_kb, as_limit_kb);
    - the harness's claims, each read with its type checked: `start` (tvm), `stage` (stage,
      pass_path), `pass` (index, name, seconds, functions, ir), `rewrites`, `reproducer`
      (text) and `result` (a Result's fields, harness_seconds, run_seconds);
    - extract mode's steps: `extract_step`, `extract_child` (parent), `extract_inner`,
      `extract_module` (harness/extract.py); check and candidate modes' `checked` (index,
      ok, reason, well_formed, source); layer mode's `layer_pass` (name), `layer_kept` (name,
      container, optional), `layer_container` (name), `layer_skip` (name) and `layer_codegen`
      (harness/layers.py).
    """

    event: Required[str]
    returncode: int | None
    signal: str | None
    maxrss_kb: int
    cpu_seconds: float
    oom_kills: int
    vm_peak_kb: int
    as_limit_kb: int
    tvm: dict[str, str]
    stage: str
    pass_path: list[str]
    index: int | str  # an extract_module event's is "inner" for the innermost pass that raised
    name: str
    seconds: float
    functions: list[object]
    ir: str
    rewrites: list[str]
    text: str
    status: str
    error_type: str
    message: str
    signature: str
    signature_frame: str
    signature_message: str
    outputs: object
    reference_outputs: object
    reference_kind: str
    reference_note: str
    reference_error: str
    harness_seconds: float
    run_seconds: float
    kind: str
    parent: int
    link: int | None
    args: dict[str, object]
    dropped_args: list[str]
    resolvable: bool
    opt_level: int
    depth: int
    config: dict[str, object]
    options: dict[str, object]
    target: str | None
    defined_as: list[str]
    well_formed: bool
    parse_error: str
    ir_json: str
    ok: bool
    reason: str
    source: str
    container: bool
    optional: bool



def verified_events(data: bytes, key: bytes) -> list[Event]:
    """The events the supervisor signed with `key`, in order, up to its `exit` event.

    Anything else on the channel (the unsigned `ready`, a line the case wrote, a
    replayed or reordered line) is not an event.
    """
    events: list[Event] = []
    last = 0
    for line in parse_events_lines(data):
        body, mac = line.get("body"), line.get("mac")
        if not isinstance(body, str) or not isinstance(mac, str):
            continue
        expected = hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256)
        if not hmac.compare_digest(expected.hexdigest(), mac):
            continue
        event = json.loads(body)
        if not isinstance(event, dict) or not isinstance(event.get("seq"), int) \
                or event["seq"] <= last or "event" not in event:
            continue
        last = event.pop("seq")
        events.append(cast(Event, event))
        if event["event"] == "exit":
            break
    return events


class SignedLine(TypedDict, total=False):
    """A line of the events channel as the supervisor writes it: an event's JSON text and its
    HMAC (a line the case wrote may hold anything)."""

    body: object
    mac: object


def parse_events_lines(data: bytes) -> list[SignedLine]:
    """Every JSON object line of `data` (a torn last line is dropped)."""
    lines: list[SignedLine] = []
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            lines.append({"body": value.get("body"), "mac": value.get("mac")})
    return lines


def exit_status(events: list[Event]) -> tuple[int | None, str | None] | None:
    """The case's (exit code, signal) as its supervisor saw them; None when it never said."""
    exit_event = next((e for e in events if e["event"] == "exit"), None)
    if exit_event is None:
        return None
    code = exit_event.get("returncode")
    sig = exit_event.get("signal")
    return (code if isinstance(code, int) else None, sig if isinstance(sig, str) else None)


def cgroup_oom_kills(events: list[Event]) -> int:
    """OOM kills in the sandbox's own memory cgroup during the run, as its supervisor counted."""
    exit_event = next((e for e in events if e["event"] == "exit"), None)
    kills = exit_event.get("oom_kills") if exit_event is not None else None
    return kills if isinstance(kills, int) else 0
