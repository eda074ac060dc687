"""A script's job title tells it apart: its file name, or where the name is generic (script.py,
report.py) its first comment or docstring line, else the name with its folder."""

from __future__ import annotations

from pathlib import Path

from cli.commands.run import run_job
from tests.conftest import CASES
from tvmrepro.cases import load_case_file

FRONTEND = CASES / "frontend"


def title(path: Path) -> str:
    return load_case_file(path).title


def test_a_named_script_is_titled_by_its_name(tmp_path: Path) -> None:
    named = tmp_path / "repro_17357.py"
    named.write_text("# a comment that is not the title\nimport tvm\n")
    assert title(named) == "repro_17357.py"


def test_a_generic_name_takes_the_scripts_own_first_line(tmp_path: Path) -> None:
    # The real reports of the corpus, each saved as report.py.
    assert title(FRONTEND / "export-tuple-with-none" / "report.py") == \
        "tvm_relax_export_none_repro.py"  # its first comment
    assert title(FRONTEND / "onnx-gather-shape-indices" / "report.py") == \
        "Reproduce the Relax ONNX ShapeType/Gather import failure."  # past the shebang
    assert title(CASES / "arith-analyzer" / "original.py") == \
        "Written for TVM 0.25/0.26, where the arithmetic analyzer lives in the arith module."
    # No comment, no docstring: the folder tells them apart.
    assert title(FRONTEND / "export-mm-default" / "report.py") == "export-mm-default/report.py"
    script = tmp_path / "script.py"
    script.write_text("# -*- coding: utf-8 -*-\n\n# FuseTIR drops a PackedFunc\nimport tvm\n")
    assert title(script) == "FuseTIR drops a PackedFunc"
    script.write_text('"""LegalizeOps crash on a 0-d max.\n\nDetails.\n"""\nimport tvm\n')
    assert title(script) == "LegalizeOps crash on a 0-d max."
    numbered = tmp_path / "test_2.py"
    numbered.write_text("import tvm\n")
    assert title(numbered) == f"{tmp_path.name}/test_2.py"


def test_the_job_the_command_submits_carries_the_title(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("# Sequential of a non-pass\nimport tvm\n")
    request = run_job(load_case_file(script), None, ["script"], bypass_cache=False)
    assert request.case["title"] == "Sequential of a non-pass"
