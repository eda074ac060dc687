"""A case's files reach its run, with real TVM: submitted to the service (a real store), run by
the worker's task in the local runtime, the script reads them from its working directory,
read-only; a pickle that does not load is the run's own error, not the service's."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.jobs import JobService
from tests.conftest import NEW_ENV
from tests.fakes.reducing_runtime import FAKE_MODULE, FakeReducingRuntime
from tests.service.stack import make_home
from tests.worker.task_runs import run_task
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.queue import make_celery
from tvmrepro.settings import Settings
from worker.narrowing.reduction import Options, reduce_case

pytestmark = pytest.mark.tvm

READS = """\
import os, stat
import numpy as np
print("sum", int(np.load("x.npy").sum()))
print("notes", open("notes.txt").read().strip())
print("mode", oct(stat.S_IMODE(os.stat("x.npy").st_mode)))
try:
    open("x.npy", "ab")
except PermissionError:
    print("read-only")
"""
UNPICKLES = "import pickle\nwith open('inputs.pkl', 'rb') as f:\n    inputs = pickle.load(f)\n"


@pytest.fixture(params=("sqlite", "postgres"))
def service(request: pytest.FixtureRequest, tmp_path: Path, test_home: Path,
            tvm_envs: dict[str, Environment]) -> Iterator[JobService]:
    """A JobService (embedded broker) on SQLite or PostgreSQL, its runs in the local runtime."""
    environ = {"TVMREPRO_HOME": str(make_home(tmp_path, test_home))}
    if request.param == "postgres":
        environ["DATABASE_URL"] = request.getfixturevalue("clean_postgres")
    opened = JobService.open(Settings.from_env(environ))
    yield opened
    opened.store.dispose()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def run(service: JobService, script: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    """Submit the script with its files on NEW_ENV, run its one run as a worker does; its
    stored result."""
    job = service.submit({"case": {"script": script, "files": files},
                          "environments": [NEW_ENV], "wait": True})
    (only,) = job.runs
    assert run_task(make_celery(service.settings), only.id) == "stored"
    result = service.store.result(only.id)
    assert result is not None
    return result


def test_the_script_reads_its_files_read_only(service: JobService) -> None:
    array = io.BytesIO()
    np.save(array, np.arange(10, dtype=np.int64))
    result = run(service, READS, [{"name": "x.npy", "content": b64(array.getvalue())},
                                  {"name": "notes.txt", "content": b64(b"from the report\n")}])
    assert result["status"] == "ok", (result["message"], result["log"]["stderr"][-2000:])
    assert result["log"]["stdout"].splitlines() == [
        "sum 45", "notes from the report", "mode 0o444", "read-only"]


def test_a_pickle_that_does_not_load_is_the_runs_error(service: JobService) -> None:
    result = run(service, UNPICKLES, [{"name": "inputs.pkl", "content": b64(b"not a pickle")}])
    assert result["status"] == "error", result
    assert result["error_type"] == "UnpicklingError"
    assert result["stage"] == "script"
    assert "pickle.load" in result["log"]["stderr"]  # raised in the case's own code


def test_every_sandbox_of_a_reduction_gets_the_files() -> None:
    """The reducer's candidates (cases remade from the case) keep its files, contents and all;
    its answer names them by digest only (what the store keeps)."""
    runtime = FakeReducingRuntime()
    case = parse_case({"source": FAKE_MODULE, "files": [
        {"name": "weights.npy", "content": b64(b"weights")}],
        "variants": [{"name": "v", "passes": ["Normalize", "FuseOps", "LegalizeOps"]}]})
    found = reduce_case(case, Options(env=default_catalog().get(NEW_ENV), variant="v"),
                        runtime).model_dump(mode="json")  # type: ignore[arg-type]
    assert runtime.jobs and all(
        [(f["name"], base64.b64decode(f["content"])) for f in job.case["files"]]
        == [("weights.npy", b"weights")] for job in runtime.jobs)
    assert found["case"]["files"] == [{"name": "weights.npy", "sha256": case.files[0].sha256,
                                       "size": 7}]
