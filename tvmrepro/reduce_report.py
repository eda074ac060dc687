"""A reduce job's section of the Markdown report: the reduced case, the passes and lines before
and after, and the command that reproduces it."""

from __future__ import annotations

import json
import shlex
from typing import Any

REDUCED_FILE = "reduced.json"
MAX_SIGNATURE_CHARS = 400


def _pass_names(case: dict[str, Any]) -> list[str]:
    passes = (case.get("variants") or [{}])[0].get("passes") or []
    return [p if isinstance(p, str) else p["name"] for p in passes]


def reproduce_command(reduced: dict[str, Any]) -> str:
    """`tvmrepro run reduced.json --local --env ENV` for the reduced case saved as reduced.json."""
    words = ["tvmrepro", "run", REDUCED_FILE, "--local", "--env", reduced["environment"]]
    return " ".join(shlex.quote(word) for word in words)


def _numbers(reduced: dict[str, Any], original_passes: list[str]) -> list[str]:
    before, after = reduced["before"], reduced["after"]
    kept = _pass_names(reduced["case"])
    return ["| | passes | module lines |", "| --- | --- | --- |",
            f"| before | {before['passes']}: {', '.join(original_passes) or '(none)'} "
            f"| {before['lines']} |",
            f"| after | {after['passes']}: {', '.join(kept) or '(none)'} | {after['lines']} |", ""]


def render_reduce(job: dict[str, Any]) -> list[str]:
    """The reduce section of a job's report (no lines for a job that is not a reduction)."""
    reduced = job.get("reduce")
    if not reduced:
        return []
    original = job.get("case") or {}
    variant = reduced.get("variant")
    original_passes = next((_pass_names({"variants": [v]}) for v in original.get("variants") or []
                            if v.get("name") == variant), [])
    signature = (reduced.get("signature") or "")[:MAX_SIGNATURE_CHARS]
    how = ("finished" if reduced.get("finished")
           else "stopped by its time budget: the best case so far")
    lines = ["#### Reduced", "",
             f"`{variant}` on `{reduced['environment']}`, oracle `{reduced['oracle']}`: "
             f"{reduced['steps']} steps, {reduced.get('runs', '?')} candidate runs, {how}.", "",
             "Signature kept:", "", "```", signature, "```", ""]
    lines += _numbers(reduced, original_passes)
    lines += ["The reduced module:", "", "```python", reduced["case"]["source"].rstrip(), "```", "",
              f"Reproduce (the case below saved as `{REDUCED_FILE}`):", "", "```sh",
              reproduce_command(reduced), "```", "",
              "<details><summary>The reduced case</summary>", "", "```json",
              json.dumps(reduced["case"], indent=2), "```", "", "</details>", ""]
    return lines
