"""A reduce or extract job's section of the Markdown report: the reduced case, the passes and
lines before and after (the extracted case, whether it reproduces the script), and the command
that reproduces it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

from tvmrepro.api.narrowed import Extraction, Reduction
from tvmrepro.cases import Case
from tvmrepro.escaping import code_block, code_span, table_cell

REDUCED_FILE = "reduced.json"
EXTRACTED_FILE = "extracted.json"
MAX_SIGNATURE_CHARS = 400


def _pass_names(case: Mapping[str, object] | None, variant: str | None = None) -> list[str]:
    """The pass names of the case's variant called `variant` (of its first one when None): the
    case as the job's JSON holds it, read as it comes."""
    variants = case.get("variants") if case else None
    chosen = next((v for v in variants if isinstance(v, dict)
                   and (variant is None or v.get("name") == variant)), None) \
        if isinstance(variants, list) else None
    passes = chosen.get("passes") if chosen else None
    return [p if isinstance(p, str) else str(p.get("name")) for p in passes
            if isinstance(p, str | dict)] if isinstance(passes, list) else []


def _case_passes(case: Case) -> list[str]:
    """The pass names of the case's first variant."""
    return [p.name for p in case.variants[0].passes] if case.variants else []


def reproduce_command(environment: str, saved_as: str = REDUCED_FILE) -> str:
    """`tvmrepro run reduced.json --local --env ENV` for the case saved as reduced.json."""
    words = ["tvmrepro", "run", saved_as, "--local", "--env", environment]
    return " ".join(shlex.quote(word) for word in words)


def _numbers(reduced: Reduction, original_passes: list[str]) -> list[str]:
    before, after = reduced.before, reduced.after
    assert before is not None and after is not None  # a reduction that is done
    kept = _case_passes(reduced.case) if reduced.case is not None else []
    def names(passes: list[str]) -> str:
        return ", ".join(table_cell(p) for p in passes) or "(none)"

    return ["| | passes | module lines |", "| --- | --- | --- |",
            f"| before | {before.passes}: {names(original_passes)} | {before.lines} |",
            f"| after | {after.passes}: {names(kept)} | {after.lines} |", ""]


def _unfinished(found: Reduction | Extraction, heading: str) -> list[str]:
    """A narrowing that has no answer (yet): where it is, or why there is none."""
    if found.error:
        return [f"#### {heading}", "", f"No case: {code_span(found.error)}", ""]
    progress = found.progress
    state = str(found.state)
    where = f": {code_span(progress.phase)}, {code_span(progress.what)}" if progress else ""
    return [f"#### {heading}", "", f"Still {state if state.isalpha() else code_span(state)}{where}.",
            ""]


def render_reduce(reduced: Reduction | None, case: Mapping[str, object]) -> list[str]:
    """The reduce section of a job's report, from its answer and its case (no lines for a job
    that is not a reduction)."""
    if reduced is None:
        return []
    if reduced.state != "done" or reduced.after is None or reduced.case is None:
        return _unfinished(reduced, "Reduced")
    original_passes = _pass_names(case, reduced.variant)
    signature = (reduced.signature or "")[:MAX_SIGNATURE_CHARS]
    how = "finished" if reduced.finished else "stopped by its time budget: the best case so far"
    lines = ["#### Reduced", "",
             f"{code_span(reduced.variant)} on {code_span(reduced.environment)}, oracle "
             f"{code_span(reduced.oracle)}: {reduced.steps} steps, "
             f"{reduced.runs} candidate runs, {how}.", "",
             "Signature kept:", "", *code_block(signature), ""]
    lines += _numbers(reduced, original_passes)
    return lines + _case_block("reduced", reduced.case, reduced.environment, REDUCED_FILE)


def _case_block(what: str, case: Case, environment: str, saved_as: str) -> list[str]:
    """The module, the command that reproduces the case, and the case itself."""
    return ["The module:" if what == "extracted" else f"The {what} module:", "",
            *code_block(str(case.source), "python"), "",
            f"Reproduce (the case below saved as `{saved_as}`):", "",
            *code_block(reproduce_command(environment, saved_as), "sh"), "",
            f"<details><summary>The {what} case</summary>", "",
            *code_block(json.dumps(case.model_dump(mode="json"), indent=2), "json"), "",
            "</details>", ""]


def render_extract(found: Extraction | None) -> list[str]:
    """The extract section of a job's report: the module-mode case and whether it reproduces."""
    if found is None:
        return []
    if found.state != "done" or not found.case:
        return _unfinished(found, "Extracted")
    case = found.case
    run = found.case_run
    said = ("gives the script's signature" if found.reproduces else
            f"does **not** reproduce the script: it gives "
            f"{code_span(run.status if run else None)} at "
            f"{code_span(run.stage if run else None)}")
    lines = ["#### Extracted", "",
             f"The script fails at {code_span(found.stage)} on "
             f"{code_span(found.environment)}; the case below starts at the module that "
             f"entered that step, with the passes "
             f"{', '.join(code_span(p) for p in _case_passes(case)) or '(none)'}, and {said}.", "",
             *[f"- {code_span(note)}" for note in found.notes],
             *([""] if found.notes else [])]
    return lines + _case_block("extracted", case, found.environment, EXTRACTED_FILE)
