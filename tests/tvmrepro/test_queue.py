"""The Celery app against the real brokers: queue lengths, broker ping, the Redis transport."""

from __future__ import annotations

import base64
import gc
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from celery import Celery
from kombu.transport import redis as redis_transport

from tests.fixtures.databases import REDIS_URL, delete_prefixed
from tests.service.stack import free_port
from tvmrepro.queue import broker_ping, make_celery, publish_run, queue_length
from tvmrepro.settings import Settings


@pytest.fixture(params=("embedded", "redis"))
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Celery]:
    """An app on the embedded broker, or on Redis under a key prefix of its own."""
    environ = {"TVMREPRO_HOME": str(tmp_path)}
    prefix = f"tvmrepro-test-{uuid.uuid4().hex[:12]}:"
    if request.param == "redis":
        environ.update(REDIS_URL=REDIS_URL, TVMREPRO_REDIS_PREFIX=prefix)
    yield make_celery(Settings.from_env(environ))
    if request.param == "redis":
        delete_prefixed(REDIS_URL, prefix)


def test_queue_length_counts_what_waits(app: Celery) -> None:
    assert queue_length(app, "tvm-x-cpu") == 0
    for run_id in ("a", "b", "c"):
        publish_run(app, run_id, "tvm-x-cpu")
    assert queue_length(app, "tvm-x-cpu") == 3
    assert queue_length(app, "tvm-y-cpu") == 0  # one queue per environment


def test_counting_an_embedded_queue_gives_its_connection_back(tmp_path: Path) -> None:
    """The recovery sweep counts queues on a fresh broker connection each time: each count gives
    its database connection back at once (they were kept until a garbage collection, and the
    pool of 15 ran dry: the worker died)."""
    from kombu.transport.sqlalchemy import Channel

    app = make_celery(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)}))
    gc.disable()  # what a leak would hold is then held for good
    try:
        for _ in range(20):
            assert queue_length(app, "tvm-0.27.0.post1-cpu") == 0
        engine = next(engine for engine, _ in Channel._engines.values()
                      if str(tmp_path) in str(engine.url))
        assert engine.pool.checkedout() == 0
    finally:
        gc.enable()


def test_redis_uses_the_ack_tolerant_transport(tmp_path: Path) -> None:
    app = make_celery(Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "REDIS_URL": REDIS_URL}))
    with app.connection_for_write() as conn:
        assert type(conn.transport).__name__ == "RedisTransport"
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.broker_transport_options["visibility_timeout"] > 1800


def test_broker_ping_raises_when_nobody_listens(tmp_path: Path) -> None:
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    app = make_celery(Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "REDIS_URL": nobody}))
    with pytest.raises(Exception, match="onnect"):  # how fast: bench/broker_away.py
        broker_ping(app)


RACERS = 8


def _publish_once(home: str, gate: str) -> str:
    """In a fresh process: wait at the gate until every racer is there, then publish."""
    app = make_celery(Settings.from_env({"TVMREPRO_HOME": home}))
    # Connected, the broker's tables read: after the gate only the queue's look-up and
    # insert remain, so the racers do meet there (a cold start spreads them out).
    with app.pool.acquire(block=True) as conn:
        assert conn.default_channel is not None
    gate_dir = Path(gate)
    (gate_dir / f"{os.getpid()}").touch()
    deadline = time.monotonic() + 300  # only against a hang: the barrier itself waits for all
    while len(list(gate_dir.iterdir())) < RACERS:
        if time.monotonic() > deadline:
            return "the other racers never arrived"
        time.sleep(0.001)
    try:
        publish_run(app, "r", "tvm-race-cpu")
        return "ok"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:200]


def test_processes_racing_to_make_an_embedded_queue_all_publish(tmp_path: Path) -> None:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    broker = make_celery(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)}))
    assert queue_length(broker, "tvm-other-cpu") == 0  # the broker's tables exist
    gate = tmp_path / "gate"
    gate.mkdir()
    # A barrier of files: whatever each interpreter's start-up costs, none publishes
    # before all eight are imported and waiting, so they do race for the new queue.
    with ProcessPoolExecutor(RACERS, mp_context=get_context("spawn")) as pool:
        outcomes = list(pool.map(_publish_once, [str(tmp_path)] * RACERS, [str(gate)] * RACERS))
    assert outcomes == ["ok"] * RACERS
    assert queue_length(broker, "tvm-race-cpu") == RACERS


def _held(app: Celery, channel: Any) -> list[tuple[str, str]]:
    """(run id, queue) of each message the broker holds as taken and not acknowledged, sorted.

    Redis: its unacknowledged set. The embedded broker has none: a taken message stays in its
    table, no longer visible (acknowledged or not), and is never delivered again.
    """
    from tvmrepro.queue import _run_of

    if isinstance(channel, redis_transport.Channel):
        client = channel.client
        runs = [_run_of(client.hget(channel.unacked_key, tag) or b"")
                for tag in client.zrange(channel.unacked_index_key, 0, -1)]
    else:
        engine = sa.create_engine(app.conf.broker_url)
        with engine.connect() as conn:
            payloads = conn.execute(sa.text(
                "SELECT payload FROM kombu_message WHERE NOT visible")).scalars().all()
        engine.dispose()
        runs = []
        for payload in payloads:
            message = json.loads(payload)
            args = json.loads(base64.b64decode(message["body"]))[0]
            runs.append((args[0], message["properties"]["delivery_info"]["routing_key"]))
    assert None not in runs, runs
    return sorted(run for run in runs if run is not None)


def test_finished_runs_leave_no_unacknowledged_message(app: Celery) -> None:
    """What a killed worker left unacknowledged is dropped once its run is done, not before
    (Redis, where it would come back after the visibility timeout). The embedded broker never
    delivers a taken message again: the sweep leaves what it holds as it is."""
    from tvmrepro.queue import drop_finished_unacked, queue_name

    env, lane = "tvm-x-cpu", {queue_name("tvm-x-cpu")}
    for run_id in ("done-run", "live-run"):
        publish_run(app, run_id, env)
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for _ in range(2):  # received and never acknowledged: a worker killed mid-run
            assert channel.basic_get(queue_name(env), no_ack=False) is not None
        taken = [("done-run", queue_name(env)), ("live-run", queue_name(env))]
        assert _held(app, channel) == taken
        # Another lane's sweep leaves these alone, finished or not.
        assert drop_finished_unacked(app, {queue_name("tvm-y-cpu")}, lambda: set()) == 0
        assert _held(app, channel) == taken
        dropped = drop_finished_unacked(app, lane, lambda: {"live-run"})
        if isinstance(channel, redis_transport.Channel):
            assert (dropped, _held(app, channel)) == (1, [("live-run", queue_name(env))])
        else:
            assert (dropped, _held(app, channel)) == (0, taken)
        assert queue_length(app, env) == 0  # neither waits to be delivered again


def test_a_worker_runs_one_run_per_core_within_its_memory(tmp_path: Path) -> None:
    from tvmrepro.queue import worker_concurrency

    unset = Settings.from_env({"TVMREPRO_HOME": str(tmp_path)})
    gib = 2**30
    assert worker_concurrency(unset, cores=8, memory_bytes=64 * gib) == 8
    assert worker_concurrency(unset, cores=8, memory_bytes=16 * gib) == 4  # 4 GiB a run
    assert worker_concurrency(unset, cores=1, memory_bytes=64 * gib) == 2  # never one alone
    assert worker_concurrency(unset) >= 2  # this machine
    chosen = Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                "TVMREPRO_WORKER_CONCURRENCY": "1"})
    assert worker_concurrency(chosen, cores=8, memory_bytes=64 * gib) == 1
