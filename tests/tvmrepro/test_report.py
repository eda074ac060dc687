"""The report's own logic on constructed jobs: the conclusion, one diff where diffs agree."""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt

from tests.tvmrepro.job_views import ENVS, job_of
from tvmrepro.api.views import (
    CellRef,
    Comparison,
    PassStep,
    SignatureGroup,
)
from tvmrepro.environments import default_catalog
from tvmrepro.jobs.report import render_report


def _comparison(env: str, body: str) -> Comparison:
    return Comparison(a=CellRef(variant="a", environment=env),
                      b=CellRef(variant="b", environment=env), identical=False,
                      first_differing_pass=PassStep(index=1, a="P", b="Q"),
                      diff=f"--- a@{env} after pass 1\n+++ b@{env} after pass 1\n{body}")


def test_the_first_line_concludes() -> None:
    first = render_report(job_of({"a": ["error"] * 3, "b": ["ok", "error", "ok"]})).splitlines()[0]
    releases: list[Any] = [default_catalog().get(e).release for e in ENVS]
    assert first == (f"**`a` fails (error) on every tested release ({releases[0]} → "
                     f"{releases[-1]}, 3 release(s)); `b` fails on {releases[1]} and passes on "
                     f"{releases[0]}, {releases[2]}.**")


def test_a_diff_that_is_the_same_everywhere_is_shown_once() -> None:
    same = [_comparison(e, "-x\n+y") for e in ENVS]
    text = render_report(job_of({"a": ["error"] * 3, "b": ["ok"] * 3}, same))
    assert text.count("```diff") == 1
    assert "first differ after pass 1: `P` in `a`, `Q` in `b`" in text
    other = same[:2] + [_comparison(ENVS[2], "-x\n+z")]
    assert render_report(job_of({"a": ["error"] * 3, "b": ["ok"] * 3}, other)).count("```diff") == 2


def test_reproduced_only_when_something_failed() -> None:
    assert "Reproduced with" in render_report(job_of({"a": ["error", "ok", "ok"]}))
    assert "Reproduced" not in render_report(job_of({"a": ["ok"] * 3}))


def test_the_first_screen_concludes_and_the_rest_is_folded() -> None:
    signature = "InternalError at VirtualMachineImpl::InitFuncPool (fused_gv)"
    job = job_of({"once": ["error"] * 3, "twice": ["ok"] * 3},
               [_comparison(e, "-x\n+y") for e in ENVS])
    for run in job.runs:
        if run.variant == "once":
            run.result = {"status": "error", "stage": "vm_init", "signature": signature,
                          "error_type": "InternalError", "message": "Cannot find fused_gv"}
    for cell in job.matrix.cells[0]:
        cell.stage = "vm_init"
    job.matrix.groups = [SignatureGroup(signature=signature, status="error",
                                        cells=[CellRef(variant="once", environment=e)
                                               for e in ENVS])]
    job.case = {"source": "x = 1\n", "variants": [{"name": "once", "passes": []}],
                "target": "llvm"}
    lines = render_report(job).splitlines()
    first = "\n".join(lines[:15])
    newest = default_catalog().get(ENVS[-1])
    assert lines[0].startswith("**`once` fails (error) on every tested release")
    assert f"(`once` on {', '.join(default_catalog().get(e).release for e in ENVS)}): " \
           f"`{signature}`" in first
    assert f"`pip install apache-tvm=={newest.release} " in first and "python repro.py" in first
    assert "| `once` | `error` at `vm_init` |" in first
    # Below it: only folded sections, each once, the case at the end.
    text = "\n".join(lines)
    below = text[text.index("Reproduced with tvm-repro"):].split("\n", 1)[1]
    summaries, outside, depth = [], [], 0
    for line in below.splitlines():
        if line.startswith("<details>") and depth == 0:
            summaries.append(re.sub(r"</?(?:details|summary)>", "", line))
        depth += line.startswith("<details>") - line.startswith("</details>")
        if depth == 0 and line and not line.startswith("</details>"):
            outside.append(line)
    assert summaries == ["Errors (cells with the same signature grouped)",
                         "Reproduce without tvm-repro", "Where the variants part",
                         "Environments", "The case"]
    assert outside == []
    tokens = MarkdownIt("commonmark").parse(text)
    assert not any(t.type == "heading_open" for t in tokens)
    blocks = [t.content for t in tokens if t.type == "fence"]
    assert len(blocks) == len(set(blocks)), "a block appears twice"
