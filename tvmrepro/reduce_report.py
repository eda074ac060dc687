"""A reduce or extract job's section of the Markdown report: the reduced case, the passes and
lines before and after (the extracted case, whether it reproduces the script), and the command
that reproduces it."""

from __future__ import annotations

import json
import shlex
from typing import Any

from tvmrepro.escaping import code_block, code_span, table_cell

REDUCED_FILE = "reduced.json"
EXTRACTED_FILE = "extracted.json"
MAX_SIGNATURE_CHARS = 400


def _pass_names(case: dict[str, Any]) -> list[str]:
    passes = (case.get("variants") or [{}])[0].get("passes") or []
    return [p if isinstance(p, str) else p["name"] for p in passes]


def reproduce_command(reduced: dict[str, Any], saved_as: str = REDUCED_FILE) -> str:
    """`tvmrepro run reduced.json --local --env ENV` for the case saved as reduced.json."""
    words = ["tvmrepro", "run", saved_as, "--local", "--env", reduced["environment"]]
    return " ".join(shlex.quote(word) for word in words)


def _numbers(reduced: dict[str, Any], original_passes: list[str]) -> list[str]:
    before, after = reduced["before"], reduced["after"]
    kept = _pass_names(reduced["case"])
    def names(passes: list[str]) -> str:
        return ", ".join(table_cell(p) for p in passes) or "(none)"

    return ["| | passes | module lines |", "| --- | --- | --- |",
            f"| before | {int(before['passes'])}: {names(original_passes)} "
            f"| {int(before['lines'])} |",
            f"| after | {int(after['passes'])}: {names(kept)} | {int(after['lines'])} |", ""]


def _count(value: Any) -> str:
    return str(value) if isinstance(value, int) else "?"


def _unfinished(found: dict[str, Any], heading: str) -> list[str]:
    """A narrowing that has no answer (yet): where it is, or why there is none."""
    if found.get("error"):
        return [f"#### {heading}", "", f"No case: {code_span(found['error'])}", ""]
    progress = found.get("progress") or {}
    state = str(found.get("state", "running"))
    where = (f": {code_span(progress.get('phase'))}, {code_span(progress.get('what'))}"
             if progress else "")
    return [f"#### {heading}", "", f"Still {state if state.isalpha() else code_span(state)}{where}.",
            ""]


def render_reduce(job: dict[str, Any]) -> list[str]:
    """The reduce section of a job's report (no lines for a job that is not a reduction)."""
    reduced = job.get("reduce")
    if not reduced:
        return []
    if reduced.get("state", "done") != "done" or not reduced.get("after"):
        return _unfinished(reduced, "Reduced")
    original = job.get("case") or {}
    variant = reduced.get("variant")
    original_passes = next((_pass_names({"variants": [v]}) for v in original.get("variants") or []
                            if v.get("name") == variant), [])
    signature = (reduced.get("signature") or "")[:MAX_SIGNATURE_CHARS]
    how = ("finished" if reduced.get("finished")
           else "stopped by its time budget: the best case so far")
    lines = ["#### Reduced", "",
             f"{code_span(variant)} on {code_span(reduced['environment'])}, oracle "
             f"{code_span(reduced['oracle'])}: {int(reduced['steps'])} steps, "
             f"{_count(reduced.get('runs'))} candidate runs, {how}.", "",
             "Signature kept:", "", *code_block(signature), ""]
    lines += _numbers(reduced, original_passes)
    return lines + _case_block("reduced", reduced["case"], reduced["environment"], REDUCED_FILE)


def _case_block(what: str, case: dict[str, Any], environment: str, saved_as: str) -> list[str]:
    """The module, the command that reproduces the case, and the case itself."""
    return ["The module:" if what == "extracted" else f"The {what} module:", "",
            *code_block(str(case["source"]), "python"), "",
            f"Reproduce (the case below saved as `{saved_as}`):", "",
            *code_block(reproduce_command({"environment": environment}, saved_as), "sh"), "",
            f"<details><summary>The {what} case</summary>", "",
            *code_block(json.dumps(case, indent=2), "json"), "", "</details>", ""]


def render_extract(job: dict[str, Any]) -> list[str]:
    """The extract section of a job's report: the module-mode case and whether it reproduces."""
    found = job.get("extract")
    if not found:
        return []
    if found.get("state", "done") != "done" or not found.get("case"):
        return _unfinished(found, "Extracted")
    case = found["case"]
    run = found.get("case_run") or {}
    said = ("gives the script's signature" if found.get("reproduces") else
            f"does **not** reproduce the script: it gives {code_span(run.get('status'))} at "
            f"{code_span(run.get('stage'))}")
    lines = ["#### Extracted", "",
             f"The script fails at {code_span(found.get('stage'))} on "
             f"{code_span(found['environment'])}; the case below starts at the module that "
             f"entered that step, with the passes "
             f"{', '.join(code_span(p) for p in _pass_names(case)) or '(none)'}, and {said}.", "",
             *[f"- {code_span(note)}" for note in found.get("notes") or []],
             *([""] if found.get("notes") else [])]
    return lines + _case_block("extracted", case, found["environment"], EXTRACTED_FILE)
