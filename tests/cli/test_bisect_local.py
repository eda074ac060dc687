"""`tvmrepro bisect --local` end to end, real TVM: module-mode cases and scripts, JSON and tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bisect_support import SKIP_RANGE, fixed_in_027, skip_in_the_middle
from tests.cli.command_line import bisect_json, tvmrepro
from tests.conftest import HISTORY_INDEX, NEW_ENV, OLD_ENV, REPO, case_path

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(600)]


def write_script(case: dict[str, Any], path: Path) -> Path:
    """A script-mode case as the .py file a user would pass."""
    path.write_text(case["script"])
    return path


def test_the_founding_case_module_mode_with_the_signature_oracle(test_home: Path) -> None:
    found = bisect_json(case_path("tvm-17357/case.json"), "--variant", "fusetir-once",
                        "--env", OLD_ENV, "--env", NEW_ENV, "--oracle", "signature",
                        home=test_home)
    assert found["verdict"] == "unchanged"
    assert [p["verdict"] for p in found["probes"]] == ["bad", "bad"]
    assert found["probes"][0]["stage"] == "vm_init"
    assert found["reference"] == NEW_ENV


def test_a_script_fixed_in_a_release_gives_the_pair(test_home: Path, tmp_path: Path) -> None:
    script = write_script(fixed_in_027(0, "local"), tmp_path / "repro.py")
    found = bisect_json(script, "--env", OLD_ENV, "--env", "tvm-0.26.0-cpu", "--env", NEW_ENV,
                        home=test_home)
    assert found["verdict"] == "changed"
    assert (found["last_before_change"], found["first_changed"]) == ("tvm-0.26.0-cpu", NEW_ENV)
    assert found["transitions"][0]["from"] == "bad" and found["transitions"][0]["to"] == "good"


def test_repeats_and_a_candidate_shown_in_the_table(test_home: Path, tmp_path: Path) -> None:
    script = write_script(skip_in_the_middle(), tmp_path / "skip.py")
    args = [arg for env in SKIP_RANGE for arg in ("--env", env)]
    found = bisect_json(script, *args, "--repeat", "2", home=test_home)
    assert [len(p["runs"]) for p in found["probes"]] == [2, 2, 2]
    assert found["transitions"][0]["candidates"] == [SKIP_RANGE[1]]
    assert found["verdict"] == "inconclusive"
    proc = tvmrepro("bisect", str(script), "--local", *args, home=test_home)
    assert proc.returncode == 0, proc.stderr
    assert f"candidates: {SKIP_RANGE[1]}" in " ".join(proc.stdout.split())
    assert "probes" in proc.stderr  # the progress line


def test_bad_options_exit_2_naming_the_flag(test_home: Path) -> None:
    case = str(case_path("tvm-17357/case.json"))
    for args, flag in [((), "--variant"), (("--variant", "fusetir-once", "--oracle", "nope"),
                                            "--oracle"),
                       (("--variant", "fusetir-once", "--env", OLD_ENV), "--env"),
                       (("--variant", "fusetir-once", "--reference", "tvm-9-cpu"), "--reference"),
                       (("--variant", "fusetir-once", "--repeat", "0"), "--repeat"),
                       (("--variant", "fusetir-once", "--history", "/nonexistent/tvm"),
                        "--history")]:
        proc = tvmrepro("bisect", case, "--local", *args, home=test_home)
        assert proc.returncode == 2, (args, proc.stderr)
        assert flag in proc.stderr, proc.stderr


def test_a_fix_between_two_candidates_names_its_window_and_its_pr(test_home: Path) -> None:
    """One bisection with a history (the shipped commit index): the window of the two
    releases' commits and the fix's PR first among its suspects (tests/cases/relax-max-0d-tensor)."""
    index = HISTORY_INDEX
    found = bisect_json(REPO / "tests/cases/relax-max-0d-tensor/case.json", "--env",
                        "tvm-0.25.0rc0-cpu", "--env", "tvm-0.25.0rc1-cpu", "--history",
                        str(index), home=test_home)
    change = found["transitions"][0]
    assert change["window"]["commits"] == 89 and not change["window"]["open_ended"]
    assert change["window"]["from_commit"].startswith("7e93b733b")
    assert change["suspects"][0]["pr"] == 19683
    listed = json.loads(tvmrepro("env", "list", "--json", home=test_home).stdout)
    commits = {row["id"]: row["commit"] for row in listed["environments"]}
    assert commits["tvm-0.25.0rc0-cpu"] == "g7e93b733b"
