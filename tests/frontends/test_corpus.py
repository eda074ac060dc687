"""The frontend corpus (tests/cases/frontend): 16 real torch and onnx reports, each answered on
the default releases as plain TVM answers it, cell by cell: status, stage, error and message.

Plain TVM's outcomes were measured outside the tool (scripts/measure-frontend-corpus: the
report run as `python report.py` in a virtual environment of exactly the release's pins and
the frontend pins); here each report runs as a script-mode case through the local runtime,
in the frontend flavour its imports select, from warm sandboxes as a worker's are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tvmrepro.cases import load_case_file
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.frontends import needs_frontends
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

CORPUS = Path(__file__).resolve().parents[1] / "cases" / "frontend"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "report.py").is_file())
# How expected.json names the stage plain TVM's traceback shows, and the tool's stage for it.
STAGES = {"import (frontend)": "frontend", "build": "build", "run": "run", "script": "script"}
# Reports whose TVM corrupts the heap: what follows depends on the heap's layout, not on the
# report. Cold, plain TVM and the tool both end with glibc's abort (SIGABRT at `run`); forked
# from a zygote that imported the frontends, glibc may notice at a later allocation (the next
# sub-case's import or build) or not at all, and the script's own comparison fails instead.
# Each is the bug reproducing; the answer's status and stage then vary from run to run.
HEAP_DEPENDENT = {"onnx-negative-indices-gather-scatter": "mismatch vs onnx.reference"}


def test_the_corpus_is_measured_on_every_default_release() -> None:
    releases = {f"tvm-{env.release}" for env in default_catalog().spanning("cpu")}
    for name in CASES:
        measured = set(json.loads((CORPUS / name / "expected.json").read_text()))
        assert releases <= measured, f"{name}: plain TVM not measured on {releases - measured}"


@pytest.mark.parametrize("name", CASES)
def test_report_answers_as_plain_tvm(name: str, frontend_runtime: LocalRuntime,
                                     default_envs: list[Environment]) -> None:
    case = load_case_file(CORPUS / name / "report.py")
    assert needs_frontends(case)
    expected = json.loads((CORPUS / name / "expected.json").read_text())
    for env in default_envs:
        plain = expected[f"tvm-{env.release}"]
        result = run_variant(case, "script", env, frontend_runtime)
        cell = f"{name} on {env.id}: {result.status} {result.stage} {result.message}"
        assert result.environment == env.id
        assert result.frontends is not None and "torch" in result.frontends, cell
        if name in HEAP_DEPENDENT and plain["outcome"] == "crash":
            assert result.stage in ("frontend", "build", "run"), cell
            assert result.signal == plain["error_type"] if result.status == "crash" else \
                (result.status, result.stage) == ("error", "run") and \
                (result.message or "").startswith(HEAP_DEPENDENT[name]), cell
            continue
        assert result.status == plain["outcome"], cell
        if plain["outcome"] == "ok":
            continue
        assert result.stage == STAGES[plain["stage_hint"]], cell
        if plain["outcome"] == "crash":
            assert result.signal == plain["error_type"], cell
            continue
        assert result.error_type == plain["error_type"], cell
        assert f"{result.error_type}: {result.message}" == plain["error_first_line"], cell
