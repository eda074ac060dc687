"""`--file PATH` of `tvmrepro run` and `tvmrepro bisect`: here (--local, real TVM) the script
reads the file from its working directory; to a service (a real API in a thread, no worker)
the file travels with the case and is stored; a file that is not there is exit code 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.cli import main
from service.jobs import JobService
from tests.cli.command_line import tvmrepro
from tests.conftest import NEW_ENV
from tests.service.stack import api_in_thread
from tvmrepro.environments import Environment

READS = "print(open('notes.txt').read().strip())\n"
# apache/tvm's previous minor release, provisioned beside NEW_ENV in the test home.
OTHER_ENV = "tvm-0.26.0-cpu"


def in_process(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """A script that prints notes.txt, and notes.txt."""
    (tmp_path / "repro.py").write_text(READS)
    (tmp_path / "notes.txt").write_text("read from its directory\n")
    return tmp_path / "repro.py", tmp_path / "notes.txt"


@pytest.mark.tvm
def test_run_local_reads_the_file(files: tuple[Path, Path], test_home: Path,
                                  tvm_envs: dict[str, Environment]) -> None:
    script, notes = files
    proc = tvmrepro("run", str(script), "--file", str(notes), "--local", "--cold", "--env",
                    NEW_ENV, "--json", home=test_home)
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["status"] == "ok", run["message"]
    assert run["log"]["stdout"] == "read from its directory\n"


@pytest.mark.tvm
def test_bisect_local_runs_every_probe_with_the_file(files: tuple[Path, Path], test_home: Path,
                                                     tvm_envs: dict[str, Environment]) -> None:
    script, notes = files
    proc = tvmrepro("bisect", str(script), "--file", str(notes), "--local", "--cold", "--env",
                    OTHER_ENV, "--env", NEW_ENV, "--json", home=test_home)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    # Without the file the script fails (FileNotFoundError): every probe ok is the file read.
    assert [(p["environment"], p["status"]) for p in found["probes"]] == [
        (OTHER_ENV, "ok"), (NEW_ENV, "ok")]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, JobService]]:
    with api_in_thread(tmp_path / "service") as (url, jobs):
        yield url, jobs


def test_run_sends_the_file_with_the_case(files: tuple[Path, Path],
                                          service: tuple[str, JobService]) -> None:
    script, notes = files
    url, jobs = service
    result = in_process("run", str(script), "--file", str(notes), "--env", NEW_ENV, "--queue",
                        "--no-wait", "--json", "--server", url)
    assert result.exit_code == 0, result.output
    job = json.loads(result.stdout)
    assert [(f["name"], f["size"]) for f in job["files"]] == [("notes.txt", 24)]
    stored = jobs.store.blobs([job["files"][0]["sha256"]])
    assert list(stored.values()) == [notes.read_bytes()]


@pytest.mark.parametrize("command", ["run", "bisect"])
def test_a_file_that_is_not_there_is_exit_code_2(command: str, files: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    script, _ = files
    result = in_process(command, str(script), "--file", str(tmp_path / "model.onnx"), "--local")
    assert result.exit_code == 2
    assert f"--file: {tmp_path / 'model.onnx'}: no such file" in " ".join(result.stderr.split())
