"""The run task, executed here (no broker) against a real store and real TVM."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV, shared_case
from tests.service.conftest import clean_postgres, postgres_url  # noqa: F401  # fixtures
from tests.service.stack import make_home
from tvmrepro.environments import Environment
from tvmrepro.lifecycle import RunState
from tvmrepro.queue import RUN_TASK, make_celery
from tvmrepro.settings import Settings

pytestmark = pytest.mark.tvm


@pytest.fixture(params=("sqlite", "postgres"))
def service(request: pytest.FixtureRequest, tmp_path: Path, test_home: Path,
            tvm_envs: dict[str, Environment]) -> Iterator[JobService]:
    """A JobService (embedded broker) whose store is SQLite or PostgreSQL."""
    environ = {"TVMREPRO_HOME": str(make_home(tmp_path, test_home)), "TVMREPRO_MAX_DELIVERIES": "2"}
    if request.param == "postgres":
        environ["DATABASE_URL"] = request.getfixturevalue("clean_postgres")
    opened = JobService.open(Settings.from_env(environ))
    yield opened
    opened.store.dispose()


def run_task(app: Celery, run_id: str) -> str:
    """Execute the task in this process, as a worker would."""
    import worker.tasks  # noqa: F401  # registers the task with the app

    outcome: str = app.tasks[RUN_TASK].apply(args=[run_id]).get()
    return outcome


def submit(service: JobService, envs: list[str], variant: str = "fusetir-once") -> dict[str, Any]:
    """A founding-case job, stored; its first run row."""
    case = json.loads(shared_case("tvm-17357/case.json").read_text())
    job = service.submit({"case": case, "environments": envs, "variants": [variant]})
    row = service.store.run(job.id, job.runs[0].id)
    assert row is not None
    return row


def test_a_run_is_run_and_stored_once(service: JobService) -> None:
    app = make_celery(service.settings)
    row = submit(service, [OLD_ENV])
    assert run_task(app, row["id"]) == "stored"
    assert run_task(app, row["id"]) == "skipped"  # a redelivered message changes nothing
    stored = service.job(row["job_id"])
    assert stored is not None
    (only,) = stored.runs
    assert only.deliveries == 1 and only.result is not None
    assert (only.result["status"], only.result["stage"]) == ("error", "vm_init")
    assert len(service.store.passes(row["id"])) == 3


def test_past_the_delivery_limit_a_run_ends_as_infra_error(service: JobService) -> None:
    app = make_celery(service.settings)
    row = submit(service, [NEW_ENV])
    dead = f"{socket.gethostname()}:{2 ** 22 + 12345}"  # above pid_max: never a live process
    for _ in range(2):  # two deliveries whose worker died mid-run
        service.store.claim(row["id"], dead, 2, 5.0, lambda _claimer: True)
    assert run_task(app, row["id"]) == "stored"
    result = service.store.result(row["id"])
    assert result is not None and result["status"] == "infra_error"
    assert result["error_type"] == "WorkerLost"


def test_a_fault_of_the_service_is_an_infra_error(service: JobService) -> None:
    app = make_celery(service.settings)
    row = submit(service, ["tvm-0.26.0-cpu"])  # not provisioned in this home
    assert run_task(app, row["id"]) == "stored"
    result = service.store.result(row["id"])
    assert result is not None and result["status"] == "infra_error"
    assert "not provisioned" in result["message"]
    assert service.store.run(row["job_id"], row["id"])["state"] == RunState.DONE  # type: ignore[index]
