"""The Markdown section of a reduce job: reduced case, passes and lines, reproduce command."""

from __future__ import annotations

from tvmrepro.api.narrowed import Extraction, Reduction
from tvmrepro.jobs.narrow.report import render_extract, render_reduce, reproduce_command

SOURCE = "from tvm.script import relax as R\n\n@I.ir_module\nclass Module:\n    pass\n"
REDUCED = {
    "state": "done", "budget_s": 900,
    "case": {"source": SOURCE, "module": "Module",
             "variants": [{"name": "once", "passes": [{"name": "LambdaLift", "args": {}}]}]},
    "oracle": "signature", "signature": "InternalError at X (f_gv)",
    "environment": "tvm-0.27.0.post1-cpu", "variant": "once",
    "before": {"passes": 3, "lines": 146}, "after": {"passes": 1, "lines": 5},
    "steps": 4, "runs": 20, "finished": False,
}
ORIGINAL = {"variants": [{"name": "once", "passes": ["FuseTIR", "LambdaLift", "Other"]}]}


def test_a_job_without_a_reduction_has_no_section() -> None:
    assert render_reduce(None, {}) == []


def test_the_section_shows_before_after_the_module_and_the_command() -> None:
    text = "\n".join(render_reduce(Reduction.model_validate(REDUCED), ORIGINAL))
    assert "| before | 3: `FuseTIR`, `LambdaLift`, `Other` | 146 |" in text
    assert "| after | 1: `LambdaLift` | 5 |" in text
    assert "```python\n" + SOURCE.rstrip() + "\n```" in text
    assert "InternalError at X (f_gv)" in text
    assert "stopped by its time budget" in text
    assert reproduce_command("tvm-0.27.0.post1-cpu") in text
    assert reproduce_command("tvm-0.27.0.post1-cpu") == \
        "tvmrepro run reduced.json --local --env tvm-0.27.0.post1-cpu"


def test_a_reduction_still_running_or_without_a_case_says_so() -> None:
    asked = {"oracle": "signature", "environment": "tvm-0.27.0.post1-cpu", "variant": "once",
             "budget_s": 900}
    running = Reduction.model_validate({**asked, "state": "running", "progress": {
        "phase": "functions", "what": "drop function f"}})
    assert "Still running: `functions`, `drop function f`." in "\n".join(
        render_reduce(running, {}))
    failed = Reduction.model_validate({**asked, "state": "failed", "error": "nothing to reduce"})
    assert "No case: `nothing to reduce`" in "\n".join(render_reduce(failed, {}))


def test_the_extract_section_shows_the_case_whether_it_reproduces_and_the_command() -> None:
    found = {"state": "done", "environment": "tvm-0.27.0.post1-cpu", "at": "chain", "stage": "build",
             "case": REDUCED["case"], "reproduces": False, "notes": ["a note"],
             "case_run": {"status": "ok", "stage": "vm_init"}}
    text = "\n".join(render_extract(Extraction.model_validate(found)))
    assert "#### Extracted" in text and "fails at `build`" in text
    assert "does **not** reproduce the script: it gives `ok` at `vm_init`" in text
    assert "- `a note`\n" in text and "```python\n" + SOURCE.rstrip() + "\n```" in text
    assert "tvmrepro run extracted.json --local --env tvm-0.27.0.post1-cpu" in text
    assert render_extract(None) == []
