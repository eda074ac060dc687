"""GET /metrics on a real service (gunicorn, two processes), a real worker and real TVM, on the
embedded backend and on Redis and PostgreSQL: a job's runs by status, a worker alive, the
durations of what ran, and the queue of an environment no worker serves as runs wait there."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from flask import Flask
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import NEW_ENV
from tests.service.in_process import writes_refused
from tests.service.stack import Backend, Stack, dump, make_home, serving
from tvmrepro.environments import Environment
from tvmrepro.queue import queue_name

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(300)]
UNSERVED_ENV = "tvm-0.26.0-cpu"  # no worker of this stack serves it
LONG_TIMEOUT_S = 300  # past the short lane's limit: the run takes the long lane
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def stack(module_backend: Backend, tmp_path_factory: pytest.TempPathFactory, test_home: Path,
          tvm_envs: dict[str, Environment]) -> Iterator[Stack]:
    """The API and a worker for NEW_ENV, shared by the module's tests on each backend."""
    with serving(module_backend, make_home(tmp_path_factory.mktemp("metrics"), test_home),
                 (NEW_ENV,)) as running:
        yield running


def scrape(stack: Stack, host: str | None = None, fresh: bool = False) -> Samples:
    """Every sample of one scrape, by (name, sorted labels), parsed by prometheus_client (on a
    connection of its own if `fresh`)."""
    headers = {"Host": host} if host else None
    response = (httpx.get(f"{stack.url}/metrics", headers=headers, timeout=30.0) if fresh
                else stack.http.get("/metrics", headers=headers))
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return parsed(response.text)


def parsed(text: str) -> Samples:
    """Every sample of an exposition, by (name, sorted labels)."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 where the scrape has none: a histogram of no run yet)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def script(tag: str, **extra: Any) -> dict[str, Any]:
    """The cheapest case: a script that prints, with a tag of its own (a fresh cache key)."""
    return {"title": f"metrics {tag}", "script": f"print('x')  # {tag}\n", **extra}


def test_a_finished_job_shows_its_runs_its_worker_and_its_durations(stack: Stack) -> None:
    before = scrape(stack)
    job = stack.wait(stack.submit({"case": script(uuid.uuid4().hex),
                                   "environments": [NEW_ENV]})["id"])
    assert job["status"] == "done" and job["runs"][0]["result"]["status"] == "ok", dump(job)
    after = scrape(stack)
    assert value(after, "tvmrepro_runs_total", status="ok") == value(
        before, "tvmrepro_runs_total", status="ok") + 1
    assert value(after, "tvmrepro_workers_alive") >= 1
    assert value(after, "tvmrepro_environment_workers", environment=NEW_ENV) >= 1
    assert value(after, "tvmrepro_environment_workers", environment=UNSERVED_ENV) == 0
    for name in ("tvmrepro_run_duration_seconds", "tvmrepro_queue_wait_seconds"):
        runs = value(after, f"{name}_bucket", environment=NEW_ENV, le="+Inf")
        assert runs >= 1 and value(after, f"{name}_gcount", environment=NEW_ENV) == runs
        assert value(after, f"{name}_gsum", environment=NEW_ENV) > 0
    # A print takes well under two minutes in a warm sandbox: its bucket counts it.
    assert value(after, "tvmrepro_run_duration_seconds_bucket", environment=NEW_ENV,
                 le="120") >= 1
    assert value(after, "tvmrepro_store_bytes") > 0
    assert value(after, "tvmrepro_metrics_source_up", source="store") == 1
    assert value(after, "tvmrepro_metrics_source_up", source="broker") == 1


def test_a_large_log_leaves_its_row_for_the_artifact_store_which_the_metrics_count(
        stack: Stack) -> None:
    before = scrape(stack)
    line = "x" * 1023
    printed = {"title": "large log", "script": f"for _ in range(400):\n    print({line!r})\n"}
    job = stack.wait(stack.submit({"case": printed, "environments": [NEW_ENV],
                                   "bypass_cache": True})["id"])
    (run,) = job["runs"]
    assert run["result"]["status"] == "ok", dump(job)
    # The whole stdout comes back through the API, read from the artifact store.
    log = stack.http.get(f"/api/v1/jobs/{job['id']}/runs/{run['id']}/log")
    assert log.status_code == 200 and log.json()["stdout"].count(line) == 400, log.text[:300]
    after = scrape(stack)
    assert value(after, "tvmrepro_artifacts") >= value(before, "tvmrepro_artifacts") + 1
    assert value(after, "tvmrepro_artifact_bytes") >= value(
        before, "tvmrepro_artifact_bytes") + 400 * 1024


def test_the_queue_grows_while_runs_wait_for_an_unserved_environment(stack: Stack) -> None:
    lanes = {"short": script(uuid.uuid4().hex),
             "long": script(uuid.uuid4().hex, timeout_s=LONG_TIMEOUT_S)}
    redis = stack.backend.redis_url is not None
    before = scrape(stack)
    jobs = [stack.submit({"case": case, "environments": [UNSERVED_ENV]}) for case in lanes.values()]
    after = scrape(stack)
    for lane, timeout_s in (("short", None), ("long", LONG_TIMEOUT_S)):
        labels = {"environment": UNSERVED_ENV, "lane": lane}
        assert value(after, "tvmrepro_queued_runs", **labels) == value(
            before, "tvmrepro_queued_runs", **labels) + 1, lane
        queue = {"queue": queue_name(UNSERVED_ENV, timeout_s), **labels}
        if redis:  # published to Redis once stored: its list holds the message too
            assert value(after, "tvmrepro_broker_queue_messages", **queue) == value(
                before, "tvmrepro_broker_queue_messages", **queue) + 1, lane
    served = {"queue": queue_name(NEW_ENV), "environment": NEW_ENV, "lane": "short"}
    listed = ("tvmrepro_broker_queue_messages", tuple(sorted(served.items()))) in after
    assert listed is redis  # Redis's queues are listed, every one; the embedded broker's not
    for job in jobs:  # cancelled: the runs leave the store's queue and Redis's
        cancel = stack.http.delete(f"/api/v1/jobs/{job['id']}",
                                   headers={"X-Cancel-Token": job["cancel_token"]})
        assert cancel.status_code == 200, cancel.text
    gone = scrape(stack)
    for lane in lanes:
        labels = {"environment": UNSERVED_ENV, "lane": lane}
        assert value(gone, "tvmrepro_queued_runs", **labels) == value(
            before, "tvmrepro_queued_runs", **labels), lane
    assert value(gone, "tvmrepro_runs_total", status="infra_error") == value(
        before, "tvmrepro_runs_total", status="infra_error") + 2


def test_every_api_process_answers_the_same_to_any_host(stack: Stack) -> None:
    # The stack's gunicorn runs two processes; fresh connections reach either. The database's
    # size on disk may grow between two scrapes (heartbeats write), and the scrape's own time.
    scrapes = [scrape(stack, host=f"10.0.0.{n}:8000", fresh=True) for n in range(6)]
    for found in scrapes:
        for name in ("tvmrepro_scrape_duration_seconds", "tvmrepro_store_bytes"):
            found.pop((name, ()))
    assert all(found == scrapes[0] for found in scrapes[1:])
    assert stack.http.get("/healthz", headers={"Host": "10.0.0.1:8000"}).status_code == 400


def test_a_scrape_writes_nothing_and_answers_without_its_store(app: Flask) -> None:
    engine = app.extensions["tvmrepro"].store.engine
    with writes_refused(engine) as attempted:
        answer = app.test_client().get("/metrics")
    assert answer.status_code == 200 and attempted == []
    assert value(parsed(answer.get_data(as_text=True)), "tvmrepro_metrics_source_up",
                 source="store") == 1

    def away(*_: Any) -> None:  # every statement fails, as on a database that went away
        raise sa.exc.OperationalError("SELECT", {}, ConnectionError("the store is away"))

    sa.event.listen(engine, "before_cursor_execute", away)
    try:
        answer = app.test_client().get("/metrics")
    finally:
        sa.event.remove(engine, "before_cursor_execute", away)
    assert answer.status_code == 200
    found = parsed(answer.get_data(as_text=True))
    assert value(found, "tvmrepro_metrics_source_up", source="store") == 0
    assert value(found, "tvmrepro_metrics_source_up", source="broker") == 1
    assert not any(name == "tvmrepro_queued_runs" for name, _ in found)
