"""`tvmrepro import --attachments DIR`: the files a report's script names are attached from the
folder of its downloaded attachments; those it names and the folder lacks are listed as not
given, and the report has no runnable script until they are (no TVM needed)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from click.testing import CliRunner

from cli.cli import main
from cli.commands.tracker import read_reports
from tvmrepro.jobs.tracker.importing import ImportedReport, import_file

CORPUS = Path(__file__).parent / "corpus" / "issues.json"
# apache/tvm#17876: its script loads "a240.onnx" and "inputs.pkl", attached to the issue.
NEEDS_TWO = 17876


def report(reports: list[ImportedReport], number: int) -> ImportedReport:
    return next(r for r in reports if r.number == number)


def test_without_the_files_the_report_lists_them_as_not_given() -> None:
    found = report(import_file(CORPUS), NEEDS_TWO)
    assert found.script is None and found.files == []
    assert found.missing_files == ["a240.onnx", "inputs.pkl"]
    assert found.no_code is not None and "file a240.onnx, file inputs.pkl" in found.no_code


def test_the_files_in_the_folder_are_attached_the_rest_listed(tmp_path: Path) -> None:
    (tmp_path / str(NEEDS_TWO)).mkdir()
    (tmp_path / str(NEEDS_TWO) / "a240.onnx").write_bytes(b"\x08\x07 an onnx model")
    partly = report(import_file(CORPUS, tmp_path), NEEDS_TWO)
    assert [f.name for f in partly.files] == ["a240.onnx"]
    assert partly.missing_files == ["inputs.pkl"] and partly.script is None
    assert partly.no_code is not None and "a240.onnx" not in partly.no_code
    (tmp_path / "inputs.pkl").write_bytes(b"\x80\x04 pickled inputs")  # the folder itself too
    whole = report(import_file(CORPUS, tmp_path), NEEDS_TWO)
    assert whole.missing_files == [] and whole.no_code is None and whole.script is not None
    case = whole.case()  # runnable: its case carries both files
    assert {f.name: f.data() for f in case.files} == {
        "a240.onnx": b"\x08\x07 an onnx model", "inputs.pkl": b"\x80\x04 pickled inputs"}


def test_the_command_attaches_and_its_output_carries_the_files(tmp_path: Path) -> None:
    attachments, out = tmp_path / "downloads", tmp_path / "imported"
    attachments.mkdir()
    (attachments / "a240.onnx").write_bytes(b"model")
    (attachments / "inputs.pkl").write_bytes(b"inputs")
    result = CliRunner().invoke(main, ["import", str(CORPUS), "--attachments", str(attachments),
                                       "-o", str(out), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    printed = report([ImportedReport.model_validate(r) for r in
                      json.loads(result.stdout)["reports"]], NEEDS_TWO)
    assert printed.no_code is None
    assert [base64.b64decode(f.content or "") for f in printed.files] == [b"model", b"inputs"]
    # What `triage DIR` reads back runs with the files.
    again = report(read_reports(out), NEEDS_TWO)
    assert {f.name: f.data() for f in again.case().files} == {"a240.onnx": b"model",
                                                              "inputs.pkl": b"inputs"}
    listed = CliRunner().invoke(main, ["import", str(CORPUS)], catch_exceptions=False)
    line = next(text for text in listed.stdout.splitlines() if text.startswith(f"#{NEEDS_TWO}"))
    assert "files not given: a240.onnx, inputs.pkl" in line


def test_a_missing_attachments_folder_is_bad_input(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["import", str(CORPUS), "--attachments",
                                       str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert "nowhere" in result.output
