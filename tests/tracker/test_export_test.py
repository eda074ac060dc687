"""export-test: a job's failure as a pytest file for TVM's suite, run by the environment's own
python (TVM and pytest, nothing of tvm-repro): it xfails while the bug is there, fails
(XPASS, strict) once the case no longer fails, and exits 0 run as a plain script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.cli import main
from tests.conftest import NEW_ENV
from tests.service.stack import Backend, Stack, make_home
from tests.tracker.conftest import founding_case, segfault_case
from tests.tracker.stored_jobs import job_view, stored_job
from tvmrepro.api.narrowed import Extraction, Reduction
from tvmrepro.api.views import JobView, Matrix, RunView
from tvmrepro.cases import parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.tracker.export_test import (
    chosen_case,
    export_test,
    known_bug_test,
    known_failure,
    message_pattern,
)
from tvmrepro.lifecycle import JobStatus, RunState
from tvmrepro.results import Result


def test_the_failure_a_signature_stands_for() -> None:
    found = known_failure("InternalError at VirtualMachineImpl::InitFuncPool (fused_gv, lv_x)",
                          "Check failed: ...", None)
    assert (found.error_type, found.names, found.message) == ("InternalError",
                                                              ("fused_gv", "lv_x"), None)
    found = known_failure("DiagnosticError: error: object of type 'int' has no len()",
                          "error: object of type 'int' has no len()\nmore", None)
    assert (found.error_type, found.names, found.message) == (
        "DiagnosticError", (), "error: object of type 'int' has no len()")
    assert known_failure("crash: SIGSEGV", None, "SIGSEGV").signal == "SIGSEGV"
    pattern = message_pattern("at 0x7f00ab in /tmp/x/y.py:  bad")
    assert pattern == r"at\s+0x[0-9a-fA-F]+\s+in\s+\S+:\s+bad"


SOURCE = ("from tvm.script import ir as I\nfrom tvm.script import relax as R\n\n"
          "@I.ir_module\nclass Module:\n    pass\n")
REDUCED = {"source": SOURCE, "module": "Module",
           "variants": [{"name": "once", "passes": [{"name": "LambdaLift", "args": {}}]}]}


def _narrowing_job(kind: str, case: dict[str, Any] | None) -> JobView:
    """A finished reduce or extract job whose one run failed with the signature it kept."""
    signature = "InternalError at LambdaLifter::VisitExpr_ (f_gv)"
    result = {"status": "error", "signature": signature, "error_type": "InternalError",
              "message": "Check failed: f_gv is not lifted"}
    answer = {"state": "done", "environment": NEW_ENV, "case": case, "signature": signature}
    return JobView(
        id="j", kind=kind, title="t", status=JobStatus.DONE, created_at="now",
        environments=[NEW_ENV], variants=["once"], bypass_cache=True, cached_runs=0,
        runs=[RunView(id="r", variant="once", environment=NEW_ENV, state=RunState.DONE,
                      cached=False, deliveries=1, result=result)],
        matrix=Matrix(variants=[], environments=[], cells=[], groups=[], comparisons=[]),
        case={"source": "x = 1\n"},
        reduce=Reduction(oracle="signature", variant="once", budget_s=60, **answer)
        if kind == "reduce" else None,
        extract=Extraction(at="build", **answer) if kind == "extract" else None)


@pytest.mark.parametrize("kind", ["reduce", "extract"])
def test_a_narrowing_job_exports_its_narrowed_case(kind: str) -> None:
    job = _narrowing_job(kind, REDUCED)
    chosen = chosen_case(job)
    assert (chosen.case, chosen.variant, chosen.environment) == (
        parse_case(REDUCED).model_dump(mode="json"), "once", NEW_ENV)
    text = export_test(job, default_catalog())
    compile(text, "test_exported.py", "exec")  # a Python file, whatever the case holds
    assert "mod = transform('LambdaLift')(mod)" in text
    assert "NAMES = ['f_gv']" in text and "ERROR_TYPE = 'InternalError'" in text
    with pytest.raises(BadInput, match="no case yet"):
        chosen_case(_narrowing_job(kind, None))


def _env_python(test_home: Path) -> str:
    return str(test_home / "envs" / NEW_ENV / "bin" / "python")


def _plain(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`command` with nothing of this project on its path."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _exported(stack: Stack, job_id: str, path: Path) -> None:
    """`tvmrepro export-test JOB -o PATH` against the stack's API."""
    ran = CliRunner().invoke(main, ["export-test", job_id, "--server", stack.url, "-o", str(path)])
    assert ran.exit_code == 0, ran.output


@pytest.mark.tvm
def test_an_exported_test_xfails_until_the_bug_is_gone(
        tmp_path: Path, test_home: Path, new_failures: dict[str, Result]) -> None:
    stack = Stack(Backend("embedded"), make_home(tmp_path, test_home))
    try:
        founding_id = stored_job(stack.store, founding_case(), [new_failures["error"]])
        crash_id = stored_job(stack.store, segfault_case(), [new_failures["crash"]])
        stack.start_api()
        tests = tmp_path / "tests"
        tests.mkdir()
        _exported(stack, founding_id, tests / "test_founding.py")
        _exported(stack, crash_id, tests / "test_segfault.py")
        founding = job_view(tmp_path, stack.store, founding_id)
    finally:
        stack.close()
    text = (tests / "test_founding.py").read_text()
    assert text == export_test(founding, default_catalog())
    assert "tvmrepro" not in text.replace("tvm-repro", "")  # nothing of this project
    # The same test of the variant that does not fail: as the bug's fix would make it pass.
    chosen = chosen_case(founding)
    env = default_catalog().get(NEW_ENV)
    failure = known_failure(chosen.signature, chosen.result.get("message"), None)
    (tests / "test_fixed.py").write_text(known_bug_test(
        chosen.case, "fusetir-twice", env.release, env.target, chosen.result.get("rewrites"),
        failure, founding.id))
    # The same failure expected with a message it does not have: another bug, not an xfail.
    other = known_failure(chosen.signature.replace("fused_", "other_"), None, None)
    (tests / "test_other.py").write_text(known_bug_test(
        chosen.case, chosen.variant, env.release, env.target, chosen.result.get("rewrites"),
        other, founding.id))
    done = _plain([_env_python(test_home), "-m", "pytest", "-p", "no:cacheprovider", "-rfxX", "-q",
                   str(tests)], tmp_path)
    summary, shown = done.stdout.strip().splitlines()[-1], done.stdout[-3000:]
    assert "2 failed" in summary and "2 xfailed" in summary, shown
    assert "FAILED tests/test_fixed.py::test_known_bug_" in done.stdout, shown
    assert "[XPASS(strict)]" in done.stdout, shown
    assert "FAILED tests/test_other.py::test_known_bug_" in done.stdout, shown
    assert "InternalError with another message" in done.stdout, shown
    # As a plain script: 0 while the bug reproduces.
    script = _plain([_env_python(test_home), str(tests / "test_segfault.py")], tmp_path)
    assert script.returncode == 0, script.stderr[-2000:]


def test_any_title_and_script_make_a_python_file() -> None:
    failure = known_failure("ValueError: bad", "bad", None)
    case = {"title": 'a """title""" \\ with\nlines', "script": "x = '''\\\\'''\nraise ValueError('bad')\\\n"}
    text = known_bug_test(case, "script", "0.27.0", "llvm", None, failure, "j")
    namespace: dict[str, Any] = {}
    compile(text, "test_exported.py", "exec")
    # Up to where it imports TVM (to name the error's class).
    exec(compile(text.split("\nEXPECTED = ")[0], "head.py", "exec"), namespace)
    assert namespace["SCRIPT"].endswith(case["script"])  # the script as it is, after its head
