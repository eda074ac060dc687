"""The run task, executed here (no broker) against a real store, with the FakeRuntime.

TVM adds nothing to what these prove (claims, delivery counting, infra errors,
one result per run): the runtime is the tests' fake one (tests/fakes/runtime.py),
added to the runtime table for these tests and selected with TVMREPRO_RUNTIME=fake,
its outcomes scripted in the case. The real runtime behind the same task is proven
over HTTP (tests/service/test_founding_over_http.py).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.jobs import JobService
from tests.fakes.runtime import DIRECTIVE, FakeRuntime
from tests.worker.task_runs import run_task
from tvmrepro.environments import default_catalog
from tvmrepro.lifecycle import RunState
from tvmrepro.queue import make_celery
from tvmrepro.settings import Settings
from worker.runtimes import RUNTIMES

ENV = "tvm-0.27.0.post1-cpu"
FAILS_AT_VM_INIT = {"status": "error", "stage": "vm_init", "error_type": "InternalError",
                    "message": "Cannot find PackedFunc fused_gv"}


@pytest.fixture(params=("sqlite", "postgres"))
def service(request: pytest.FixtureRequest, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[JobService]:
    """A JobService (embedded broker) whose store is SQLite or PostgreSQL; runs are fake."""
    monkeypatch.setitem(RUNTIMES, "fake", FakeRuntime)  # the product has none (tests/fakes)
    environ = {"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_MAX_DELIVERIES": "2",
               "TVMREPRO_RUNTIME": "fake"}
    if request.param == "postgres":
        environ["DATABASE_URL"] = request.getfixturevalue("clean_postgres")
    opened = JobService.open(Settings.from_env(environ))
    fake = FakeRuntime(opened.settings)
    opened.store.save_fingerprint(ENV, fake.fingerprint(default_catalog().get(ENV)))
    yield opened
    opened.store.dispose()


def submit(service: JobService, outcome: dict[str, Any]) -> dict[str, Any]:
    """A one-run job whose run ends as `outcome` scripts, stored; its run row."""
    case = {"source": f"{DIRECTIVE} {json.dumps(outcome)}\nx = 1\n", "variants": [
        {"name": "v", "passes": ["FuseTIR", "LambdaLift", "AllocateWorkspace"]}]}
    job = service.submit({"case": case, "environments": [ENV], "wait": True})
    row = service.store.run(job.id, job.runs[0].id)
    assert row is not None
    return row.model_dump()


def test_a_run_is_run_and_stored_once(service: JobService) -> None:
    app = make_celery(service.settings)
    row = submit(service, FAILS_AT_VM_INIT)
    assert run_task(app, row["id"]) == "stored"
    assert run_task(app, row["id"]) == "skipped"  # a redelivered message changes nothing
    stored = service.job(row["job_id"])
    assert stored is not None
    (only,) = stored.runs
    assert only.deliveries == 1 and only.result is not None
    assert (only.result["status"], only.result["stage"]) == ("error", "vm_init")
    assert only.result["isolation"]["runtime"] == "fake"
    assert [p["name"] for p in service.store.passes(row["id"])] == [
        "FuseTIR", "LambdaLift", "AllocateWorkspace"]


def test_past_the_delivery_limit_a_run_ends_as_infra_error(service: JobService) -> None:
    app = make_celery(service.settings)
    row = submit(service, {"status": "ok"})
    dead = f"{socket.gethostname()}:{2 ** 22 + 12345}"  # above pid_max: never a live process
    for _ in range(2):  # two deliveries whose worker died mid-run
        service.store.claim(row["id"], dead, 2, 5.0, lambda _claimer: True)
    assert run_task(app, row["id"]) == "stored"
    result = service.store.result(row["id"])
    assert result is not None and result["status"] == "infra_error"
    assert result["error_type"] == "WorkerLost"


def test_a_fault_of_the_runtime_is_an_infra_error(service: JobService) -> None:
    app = make_celery(service.settings)
    row = submit(service, {"fault": "environment is not provisioned here"})
    assert run_task(app, row["id"]) == "stored"
    result = service.store.result(row["id"])
    assert result is not None and result["status"] == "infra_error"
    assert (result["error_type"], result["message"]) == (
        "RuntimeFault", "environment is not provisioned here")
    stored = service.store.run(row["job_id"], row["id"])
    assert stored is not None and stored.state == RunState.DONE


def test_nul_bytes_in_what_a_run_printed_are_stored(service: JobService) -> None:
    app = make_celery(service.settings)
    row = submit(service, {"status": "error", "message": "bad \u0000 byte \ud800",
                           "stdout": "a\u0000b"})
    assert run_task(app, row["id"]) == "stored"
    result = service.store.result(row["id"])
    assert result is not None and result["status"] == "error"
    assert "\x00" not in result["message"] and "\\x00" in result["message"]


def test_a_result_the_store_refuses_is_the_runs_infra_error(service: JobService) -> None:
    import sqlalchemy as sa

    from tvmrepro.results import Result
    from worker import tasks

    app = make_celery(service.settings)
    row = submit(service, {"status": "ok"})
    ctx = tasks.context(app)
    claim = ctx.store.claim(row["id"], "test:1", 3, 5.0, lambda _claimer: False)
    real_finish = ctx.store.finish

    def refuse_once(run_id: str, result: Result) -> bool:
        if result.status == "ok":  # the store refuses this one result (as PostgreSQL may)
            raise sa.exc.DataError("INSERT", {}, Exception("invalid byte sequence"))
        return real_finish(run_id, result)

    ctx.store.finish = refuse_once  # type: ignore[method-assign]
    try:
        assert tasks.finish(ctx, claim, tasks.execute(ctx, claim)) is True
    finally:
        ctx.store.finish = real_finish  # type: ignore[method-assign]
    result = service.store.result(row["id"])
    assert result is not None and result["status"] == "infra_error"
    assert result["error_type"] == "StoreError" and "invalid byte sequence" in result["message"]
