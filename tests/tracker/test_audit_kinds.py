"""A report is about the error it quotes: a run shows its bug only where it fails at least as
badly (a crash, TVM's own check, any other exception, a diagnostic), and not where it stops
with a diagnostic before the stage the quoted error came from. Real corpus bodies, their runs
as tvm-repro reports them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tvmrepro.jobs.tracker.importing import ImportedReport, export_entry, import_body
from tvmrepro.jobs.tracker.stages import earlier, traceback_stage
from tvmrepro.jobs.tracker.triage import Kind, TriageRun, Verdict, error_kind, fails, triage

CORPUS = Path(__file__).parent / "corpus" / "issues.json"
OLD, NEW = "tvm-0.25.0-cpu", "tvm-0.27.0.post1-cpu"
# What TVMScript's parser says of an argument tuple bound to a variable since apache/tvm#17243
# (the corpus's #17239 measured on every pinned release).
DIAGNOSTIC = ("DiagnosticError: error: Mismatched type on argument #1 when calling: "
              "`relax.op.call_tir_inplace(...)`. Expected `Tuple` but got `Var`")


def closed(number: int) -> ImportedReport:
    """The corpus's issue, as if its maintainers had closed it."""
    issue = next(i for i in json.loads(CORPUS.read_text()) if i["number"] == number)
    return export_entry(issue | {"state": "CLOSED"}, 0)


def run(env: str, status: str, stage: str, error: str | None) -> TriageRun:
    signature = "crash: SIGSEGV at run" if status == "crash" else error
    return TriageRun(env=env, status=status, stage=stage, error=error, signature=signature)


def test_an_internal_error_now_a_diagnostic_at_parse_is_fixed() -> None:
    # #20200 quotes an InternalError from the build; its script now stops at parsing with a
    # diagnostic: the input rejected up front, which is its fix, not a closed bug reproducing.
    report = closed(20200)
    assert (report.quoted_error_type, report.quoted_stage) == ("InternalError", None)
    old = run(OLD, "error", "build", "InternalError: Check failed: (tir_call->op == "
                                     "tirx::builtin::anylist_getitem()) is false:")
    answer = triage([report], [[old, run(NEW, "error", "parse", DIAGNOSTIC)]])
    assert (answer.reports[0].verdict, answer.reports[0].since) == (Verdict.FIXED, NEW)
    assert answer.audit == []


def test_a_segfault_now_a_diagnostic_is_fixed() -> None:
    report = closed(17239)
    assert report.quoted_error_type == "crash"
    answer = triage([report], [[run(OLD, "crash", "parse", "SIGSEGV"),
                                run(NEW, "error", "parse", DIAGNOSTIC)]])
    assert (answer.reports[0].verdict, answer.audit) == (Verdict.FIXED, [])


def test_a_quoted_diagnostic_is_fixed_by_one_raised_before_its_stage() -> None:
    # #17406 quotes "TVMError: Argument 0 type mismatch" from relax.build (its traceback);
    # the same words as a ValueError at the build reproduce it, a diagnostic at parse fixes it.
    report = closed(17406)
    assert (report.quoted_error_type, report.quoted_stage) == ("TVMError", "build")
    same = run(OLD, "error", "build", "ValueError: Argument 0 type mismatch: expected "
                                      'R.Tensor((2, 3), dtype="float32"), given R.Any')
    answer = triage([report], [[same, same.model_copy(update={"env": NEW})]])
    assert [entry.finding.value for entry in answer.audit] == ["closed_but_reproduces"]
    answer = triage([report], [[same, run(NEW, "error", "parse", DIAGNOSTIC)]])
    assert (answer.reports[0].verdict, answer.audit) == (Verdict.FIXED, [])


@pytest.mark.parametrize("quoted, status, error, stage, shown", [
    ("InternalError: Check failed: a", "error", "InternalError: Check failed: b", "build", True),
    ("InternalError: Check failed: a", "error", "ValueError: b must be a tensor", "build", False),
    # The quoted words under another class: the same error.
    ("InternalError: Check failed: x is false", "error", "ValueError: Check failed: x is false",
     "build", True),
    ("ValueError: bad", "error", "InternalError: Check failed: b", "parse", True),
    ("ValueError: bad", "crash", "SIGSEGV", "run", True),
    ("ValueError: bad", "error", "AttributeError: no attribute", "parse", True),
    ("AssertionError: emit_te only takes a Tensor", "error", "ValueError: b", "build", False),
    ("Segmentation fault (core dumped)", "error", "InternalError: Check failed", "run", False),
    ("Segmentation fault (core dumped)", "timeout", None, "run", False),
    ("InternalError: Check failed: a", "timeout", None, "run", True),
    # An error whose class the run did not keep: less than a crash, else the bug.
    ("InternalError: Check failed: a", "error", None, "run", True),
])
def test_a_run_shows_the_bug_as_its_kind_and_stage_say(quoted: str, status: str,
                                                       error: str | None, stage: str,
                                                       shown: bool) -> None:
    report = import_body(f"```python\nimport tvm\n```\n\n```\n{quoted}\n```\n", 1, "t")
    assert fails(report, run(NEW, status, stage, error), "build") is shown


def test_kinds_and_stages() -> None:
    assert [error_kind(line) for line in ("TVMError: Check failed: x", "tvm.error.InternalError: y",
                                          DIAGNOSTIC, "TypeError: z", "KeyError: w")] == \
        [Kind.INTERNAL, Kind.INTERNAL, Kind.DIAGNOSTIC, Kind.DIAGNOSTIC, Kind.ERROR]
    assert earlier("parse", "build") and earlier("pass:1:FuseOps", "pass:3:FuseTIR")
    assert not earlier("pass", "pass:3:FuseTIR") and not earlier("script", "build")
    assert not earlier("build", "parse") and not earlier("parse", None)
    assert traceback_stage('Traceback (most recent call last):\n  File "t.py", line 3, in m\n'
                           "    vm = relax.VirtualMachine(ex, tvm.cpu())\n") == "vm_init"
