"""The shapes of an extraction: the steps a script's run in extract mode recorded
(harness/extract.py's events), the case made from them, and the harness's check of a source
(harness/reduce_module.py), which a reduction uses too."""

from __future__ import annotations

from typing import NamedTuple, TypedDict

from tvmrepro.results import Result
from worker.runtimes.events import Event


class BuildOptions(TypedDict, total=False):
    """A build's options as the script gave them (harness/extract.py's `_build_options`)."""

    exec_mode: str
    relax_pipeline: str
    tir_pipeline: str
    unnamed: list[str]  # those given as Pass objects, which a case cannot carry


class Step(TypedDict, total=False):
    """A step the script's run recorded (an `extract_step`, `extract_child` or `extract_inner`
    event, with its `extract_module` parse-back merged in): a top-level pass or a build, the
    module that entered it, and for a pipeline the passes run directly inside it."""

    index: int
    kind: str
    name: str
    link: int | None  # the step whose output entered this one
    args: dict[str, object]
    dropped_args: list[str]
    resolvable: bool  # a case can name it as a pass
    children: list[Step]
    opt_level: int
    config: dict[str, object]
    options: BuildOptions
    target: str | None
    ir: str
    ir_json: str
    defined_as: list[str]
    well_formed: bool
    parse_error: str
    imported_by: str | None  # the importer whose module this very one is


class PassSpec(TypedDict):
    """A pass with arguments, as a case's variant names it."""

    name: str
    args: dict[str, object]


class BuildFields(TypedDict, total=False):
    """What a case keeps of the script's build: its options and its PassContext config."""

    exec_mode: str
    relax_pipeline: str
    tir_pipeline: str
    pass_config: dict[str, object]


class CaseData(BuildFields, total=False):
    """An extracted case as parse_case takes it, with the fallbacks module_forms chooses from
    when its module does not parse back (`parse_error` and those after it)."""

    title: str
    source: str
    module: str
    variants: list[dict[str, object]]
    target: str | None
    opt_level: int
    entry: str | None
    reference: str
    inputs: dict[str, object]
    files: list[dict[str, str]]  # attachments, with their contents
    timeout_s: int
    memory_mb: int
    module_json: str
    parse_error: str
    start_step: list[int | str]  # [index ("inner" for the innermost pass), name]
    script_module: list[str]  # [class name, its source]


class Checked(TypedDict, total=False):
    """The harness's check of one source (`checked` events): whether it parses, and the module
    printed back."""

    ok: bool
    reason: str
    well_formed: bool
    source: str


class Recorded(NamedTuple):
    """The script's run in extract mode: its result, its recorded steps, and the innermost
    pass that raised."""

    result: Result
    steps: list[Step]
    inner: Step | None
    captured: Event | None = None  # the imported entry's call (harness/captured.py)
    containers: list[str] = []  # the pipelines it met (harness/layers.py's listing)


def checked(event: Event) -> Checked:
    """A `checked` event's verdict on its source."""
    verdict: Checked = {"ok": bool(event.get("ok"))}
    if "reason" in event:
        verdict["reason"] = event["reason"]
    if "well_formed" in event:
        verdict["well_formed"] = event["well_formed"]
    if "source" in event:
        verdict["source"] = event["source"]
    return verdict
