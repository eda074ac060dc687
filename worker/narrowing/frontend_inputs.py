"""A frontend script's inputs and reference outputs, as files of its extracted case.

A script that imports a model (from_onnx, from_exported_program) gives its VM the inputs it
made with the framework; the harness captures the last call of the imported entry and the
framework's outputs on the same inputs (harness/captured.py). The extracted case carries
them as .npy files: `entry` "main" called on `inputs.files`, and `reference` loading the
framework's outputs, so that a release that builds the module says whether it computes what
the framework does, without the framework. A script that fails before its VM (a pass, the
build) never called it: its inputs come from the unoptimised path of a layer verdict (the
imported module built with its lowering alone, docs/layers.md), where that path reaches the
VM.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid

from tvmrepro.attachments import WITH_CONTENTS, Attachment
from tvmrepro.cases import Case
from tvmrepro.environments import Environment
from worker.narrowing.extract_steps import CaseData
from worker.runner import harness_case
from worker.runtimes.base import Runtime, SandboxJob
from worker.runtimes.events import Event

ENTRY = "main"  # the function every importer makes


def captured_event(events: list[Event]) -> Event | None:
    """The run's `captured` event (an imported entry's call), if any."""
    return next((e for e in reversed(events) if e["event"] == "captured"), None)


def containers_of(events: list[Event]) -> list[str]:
    """The pipelines the run met (a layer path keeps their lowering: layers.py)."""
    return sorted({str(e.get("name")) for e in events if e["event"] == "layer_container"})


def unoptimised_capture(script: Case, env: Environment, runtime: Runtime,
                        containers: list[str], job_id: str) -> Event | None:
    """The script's imported module built with its lowering alone, its entry's inputs
    captured where that reaches the VM (None where it does not)."""
    data = harness_case(script, env)
    data["harness"] = {"mode": "layer", "keep": 0, "containers": containers, "capture": True}
    job = SandboxJob(run_id=uuid.uuid4().hex, job_id=job_id, env=env, case=data,
                     variant=script.variant_names[0])
    return captured_event(runtime.execute(job).events)


@dataclasses.dataclass
class Captured:
    """What the extracted case takes of a capture, and where the capture came from."""

    event: Event
    where: str  # "in the script's own run", or on the unoptimised path


def with_inputs(data: CaseData, captured: Captured | None) -> tuple[CaseData, list[str]]:
    """The case given the captured inputs and reference as files (unchanged without a
    capture), and notes saying what it carries."""
    if captured is None:
        return data, ["no VM call of the imported entry was seen: the case builds and creates "
                      "the VM only"]
    event = captured.event
    inputs = _texts(event, "inputs")
    if not inputs:
        return data, ["the script's inputs are over what a case carries: left out"]
    files = [_file(f"input_{i}.npy", text) for i, text in enumerate(inputs)]
    references = _texts(event, "reference")
    names = [f"reference_{i}.npy" for i in range(len(references))]
    files += [_file(name, text) for name, text in zip(names, references, strict=True)]
    out: CaseData = {**data, "entry": ENTRY, "files": files,
                     "inputs": {"files": [f"input_{i}.npy" for i in range(len(inputs))]}}
    notes = [f"{ENTRY} is called on the inputs the script gave its VM {captured.where} "
             f"({', '.join(_texts(event, 'params'))}: "
             f"{', '.join(f['name'] for f in files[:len(inputs)])})"]
    if names:
        loads = [f"np.load({name!r})" for name in names]
        out["reference"] = f"[{', '.join(loads)}]" if event.get("reference_tuple") else loads[0]
        notes.append(f"its outputs are compared with the framework's on them ({', '.join(names)})")
    notes += [f"{what}: over what a case carries, left out" for what in _texts(event, "left_out")]
    return out, notes


def _texts(event: Event, key: str) -> list[str]:
    """A list field of the event, as strings."""
    value = event.get(key)
    return [str(item) for item in value] if isinstance(value, list) else []


def _file(name: str, text: str) -> dict[str, str]:
    """A case's file from the base64 of its bytes (checked as any submitted file is)."""
    return Attachment.of(name, base64.b64decode(text)).model_dump(mode="json",
                                                                   context=WITH_CONTENTS)
