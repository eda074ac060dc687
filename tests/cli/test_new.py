"""`tvmrepro new`: a .py file with a module becomes a case that runs like the hand-written one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.command_line import tvmrepro
from tests.conftest import MISSING_FUNCTION, NEW_ENV, case_path
from tvmrepro.environments import Environment


@pytest.fixture
def module_file(tmp_path: Path) -> Path:
    """The founding case's TVMScript as a plain .py file."""
    path = tmp_path / "module.py"
    path.write_text(json.loads(case_path("tvm-17357/case.json").read_text())["source"])
    return path


@pytest.mark.tvm
def test_new_makes_a_case_that_reproduces(module_file: Path, tmp_path: Path, test_home: Path,
                                          tvm_envs: dict[str, Environment]) -> None:
    case = tmp_path / "case.json"
    made = tvmrepro("new", str(module_file), "--variant",
                    "once=FuseTIR,LambdaLift,AllocateWorkspace", "--variant",
                    "twice=FuseTIR,LambdaLift,FuseTIR,AllocateWorkspace", "-o", str(case),
                    home=test_home)
    assert made.returncode == 0, made.stderr
    written = json.loads(case.read_text())
    assert written["module"] == "Module" and written["source"] == module_file.read_text()
    proc = tvmrepro("run", str(case), "--local", "--env", NEW_ENV, "--json", home=test_home)
    assert proc.returncode == 0, proc.stderr
    runs = {r["variant"]: r for r in json.loads(proc.stdout)["runs"]}
    assert (runs["once"]["status"], runs["once"]["stage"]) == ("error", "vm_init")
    assert MISSING_FUNCTION in runs["once"]["message"]
    assert runs["twice"]["status"] == "ok"


@pytest.mark.parametrize(("args", "problem"), [
    ([], "--variant: give at least one pass sequence"),
    (["--variant", "once="], "--variant[0]: 'once=' names no pass"),
    (["--variant", "a=FuseTIR", "--module", "Nope"], "has no @I.ir_module class 'Nope'"),
])
def test_new_names_what_is_wrong(module_file: Path, tmp_path: Path, args: list[str],
                                 problem: str) -> None:
    proc = tvmrepro("new", str(module_file), *args, home=tmp_path)
    assert proc.returncode == 2 and problem in proc.stderr, proc.stderr


def test_new_refuses_a_file_without_a_module(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    proc = tvmrepro("new", str(plain), "--variant", "a=FuseTIR", home=tmp_path)
    assert proc.returncode == 2
    assert "defines 0 @I.ir_module classes (none); name one" in proc.stderr


@pytest.mark.tvm
def test_new_refuses_a_pass_no_provisioned_environment_has(
        module_file: Path, test_home: Path, tvm_envs: dict[str, Environment]) -> None:
    proc = tvmrepro("new", str(module_file), "--variant", "once=FuseTIR,LambdaLft",
                    home=test_home)
    assert proc.returncode == 2, proc.stdout
    assert "variants[0].passes[1]: unknown pass 'LambdaLft'" in proc.stderr
    assert "did you mean LambdaLift?" in proc.stderr
