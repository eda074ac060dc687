"""The harness's side of a case's files: each written read-only under its name into the work
directory, none outside it; and the harness takes every request the service admits."""

from __future__ import annotations

import base64
import json
import stat
import sys
from pathlib import Path

import pytest

from images import IMAGES_DIR

sys.path.insert(0, str(IMAGES_DIR))  # the harness is a top-level package inside images/
from harness.attachments import write_files  # noqa: E402
from harness.supervisor import MAX_REQUEST_BYTES as HARNESS_REQUEST_BYTES  # noqa: E402

from tvmrepro.settings import MAX_CASE_BYTES, MAX_FILES, MAX_FILES_BYTES, MAX_REQUEST_BYTES  # noqa: E402


def entry(name: str, data: bytes) -> dict[str, str]:
    return {"name": name, "content": base64.b64encode(data).decode()}


def test_files_are_written_read_only_and_taken_out_of_the_case(tmp_path: Path) -> None:
    case = {"script": "pass", "files": [entry("model.onnx", b"\x08\x07"), entry("in.pkl", b"")]}
    assert write_files(case, tmp_path) == ["model.onnx", "in.pkl"]
    assert (tmp_path / "model.onnx").read_bytes() == b"\x08\x07"
    assert stat.S_IMODE((tmp_path / "model.onnx").stat().st_mode) == 0o444
    assert "files" not in case  # their contents are not kept while the case runs


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/passwd", ".hidden", "a/b", ""])
def test_no_name_reaches_outside_the_work_directory(tmp_path: Path, name: str) -> None:
    (tmp_path / "work").mkdir()
    with pytest.raises(ValueError, match="not a plain file name"):
        write_files({"files": [entry(name, b"x")]}, tmp_path / "work")
    assert not (tmp_path / "escape.txt").exists()
    assert list((tmp_path / "work").iterdir()) == []


def test_a_name_already_there_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("kept")
    (tmp_path / "link.txt").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        write_files({"files": [entry("link.txt", b"x")]}, tmp_path)
    assert (tmp_path / "elsewhere").read_text() == "kept"


def test_the_caps_agree() -> None:
    # The service admits a case's text and its most files in base64 (with their names), and the
    # harness reads every request that the service admits (the request is the case as JSON).
    largest = MAX_CASE_BYTES + 4 * -(-MAX_FILES_BYTES // 3) + MAX_FILES * len(json.dumps(
        {"name": "n" * 128, "content": ""}))
    assert largest <= MAX_REQUEST_BYTES < HARNESS_REQUEST_BYTES
