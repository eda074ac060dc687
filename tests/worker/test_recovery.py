"""The recovery sweep's rules, one branch at a time, on a real store and the embedded broker.

No worker runs here: each test makes the store say what a lost broker, a dead
process or a lost host would leave behind (times moved into the past by
writing the run's row), and asks the sweeper what it would publish again.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from service.jobs import JobService
from tests.fakes.runtime import FakeRuntime
from tvmrepro.environments import default_catalog
from tvmrepro.liveness import claimer_gone, process_token
from tvmrepro.queue import SHORT_RUN_S, queue_length, queue_name
from tvmrepro.settings import Settings
from tvmrepro.store import schema
from worker.recovery import HANDBACK_S, SETTLE_S, Sweeper

ENV = "tvm-0.27.0.post1-cpu"
REQUEUE_AFTER_S, CLAIM_GRACE_S, TIMEOUT_S = 60.0, 5.0, 10
OTHER_HOST = f"not-{socket.gethostname()}:4242:1.00"  # a claimer whose liveness we cannot see
OTHER_WORKER = f"not-{socket.gethostname()}:4200:1.00"  # the main process of that host's worker
DEAD_HERE = f"{socket.gethostname()}:{2 ** 22 + 7}:1.00"  # above pid_max: never a live process


@pytest.fixture
def service(tmp_path: Path) -> Iterator[JobService]:
    """A job service on a fresh home (embedded broker, SQLite), its environment fingerprinted."""
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                  "TVMREPRO_REQUEUE_AFTER_S": str(REQUEUE_AFTER_S),
                                  "TVMREPRO_CLAIM_GRACE_S": str(CLAIM_GRACE_S)})
    opened = JobService.open(settings)
    opened.store.save_fingerprint(ENV, FakeRuntime(settings).fingerprint(default_catalog().get(ENV)))
    yield opened
    opened.store.dispose()


@pytest.fixture
def sweeper(service: JobService) -> Iterator[Sweeper]:
    """The sweeper a worker serving ENV runs."""
    made = Sweeper(service.celery, service.settings, [ENV])
    yield made
    made.store.dispose()


def submit(service: JobService, timeout_s: int = TIMEOUT_S) -> str:
    """A one-run job, stored and published; its run id."""
    job = service.submit({"case": {"source": "x = 1\n", "variants": [
        {"name": "v", "passes": ["FuseTIR"]}], "timeout_s": timeout_s}, "environments": [ENV],
        "wait": True})
    return job.runs[0].id


def lost(sweeper: Sweeper) -> list[tuple[str, str]]:
    """(run id, environment) of the runs one sweep would publish again."""
    return [(row.id, row.environment) for row in sweeper.lost_runs()]


def lose_messages(service: JobService) -> None:
    """The broker forgets the queue's messages (a Redis restarted without persistence)."""
    with service.celery.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue_name(ENV))
    assert queue_length(service.celery, ENV) == 0


def set_row(service: JobService, run_id: str, **values: Any) -> None:
    """Write columns of a run's row (times in the past, a claimer)."""
    with service.store.engine.begin() as conn:
        conn.execute(schema.runs.update().where(schema.runs.c.id == run_id).values(**values))


def claimed(service: JobService, run_id: str, by: str, ago_s: float) -> None:
    """The run claimed by `by`, `ago_s` seconds ago (published just before)."""
    assert service.store.claim(run_id, by, 3, CLAIM_GRACE_S, lambda _token: False).action == "run"
    set_row(service, run_id, claimed_at=time.time() - ago_s, published_at=time.time() - ago_s - 1)


def test_a_waiting_run_is_lost_only_when_two_sweeps_find_its_queue_empty(
        service: JobService, sweeper: Sweeper) -> None:
    run_id = submit(service)
    set_row(service, run_id, published_at=time.time() - SETTLE_S - 1)
    assert lost(sweeper) == []  # its message is there
    lose_messages(service)
    assert lost(sweeper) == []  # one empty look may fall between delivery and claim
    assert lost(sweeper) == [(run_id, ENV)]
    assert lost(sweeper) == []  # reported (tick publishes it): the count starts afresh


def test_an_empty_queue_seen_once_then_filled_again_loses_nothing(
        service: JobService, sweeper: Sweeper) -> None:
    run_id = submit(service)
    set_row(service, run_id, published_at=time.time() - SETTLE_S - 1)
    lose_messages(service)
    assert lost(sweeper) == []
    submit(service)  # the queue has a message again
    assert lost(sweeper) == []


def test_a_message_younger_than_the_settle_time_is_not_missing(
        service: JobService, sweeper: Sweeper) -> None:
    submit(service)
    lose_messages(service)
    assert lost(sweeper) == lost(sweeper) == []


def test_a_run_waiting_past_requeue_after_is_published_again_even_with_a_queue(
        service: JobService, sweeper: Sweeper) -> None:
    run_id = submit(service)
    set_row(service, run_id, published_at=time.time() - REQUEUE_AFTER_S + 5)
    assert lost(sweeper) == []
    set_row(service, run_id, published_at=time.time() - REQUEUE_AFTER_S - 1)
    assert queue_length(service.celery, ENV) == 1
    assert lost(sweeper) == [(run_id, ENV)]


def test_a_claimer_on_a_host_that_heartbeats_is_given_up_after_the_time_limit_and_grace(
        service: JobService, sweeper: Sweeper) -> None:
    run_id = submit(service)
    service.store.heartbeat(OTHER_WORKER, [ENV])  # the host lives: its lease holds
    claimed(service, run_id, OTHER_HOST, ago_s=TIMEOUT_S + CLAIM_GRACE_S - 2)
    assert lost(sweeper) == []  # its host may still be running it
    claimed_at = time.time() - TIMEOUT_S - CLAIM_GRACE_S - 1
    set_row(service, run_id, claimed_at=claimed_at, published_at=claimed_at - 1)
    assert lost(sweeper) == [(run_id, ENV)]


def make_stale(service: JobService, worker: str) -> None:
    """The worker's last heartbeat is older than worker_stale_s (its host went silent)."""
    with service.store.engine.begin() as conn:
        conn.execute(schema.workers.update().where(schema.workers.c.id == worker).values(
            heartbeat_at=time.time() - service.settings.worker_stale_s - 1))


def test_a_claim_of_a_host_whose_workers_went_silent_is_taken_over_at_once(
        service: JobService, sweeper: Sweeper) -> None:
    run_id = submit(service)
    service.store.heartbeat(OTHER_WORKER, [ENV])
    claimed(service, run_id, OTHER_HOST, ago_s=1)
    stale_s = service.settings.worker_stale_s
    assert service.store.live_hosts(stale_s) == {f"not-{socket.gethostname()}"}
    assert lost(sweeper) == []
    held = partial(claimer_gone, live_hosts=service.store.live_hosts(stale_s))
    assert service.store.claim(run_id, "taker:1:1.00", 3, CLAIM_GRACE_S, held).action == "skip"
    make_stale(service, OTHER_WORKER)  # the host is dead or cut off: its lease ran out
    assert service.store.live_hosts(stale_s) == set()
    assert lost(sweeper) == [(run_id, ENV)]  # at once: no pool process of it hands anything back
    gone = partial(claimer_gone, live_hosts=service.store.live_hosts(stale_s))
    assert service.store.claim(run_id, "taker:1:1.00", 3, CLAIM_GRACE_S, gone).action == "run"


def test_a_run_published_again_since_it_was_claimed_is_left_alone(
        service: JobService, sweeper: Sweeper) -> None:
    run_id = submit(service)
    claimed(service, run_id, OTHER_HOST, ago_s=TIMEOUT_S + CLAIM_GRACE_S + 30)
    set_row(service, run_id, published_at=time.time() - 10)  # a sweep published it since
    assert lost(sweeper) == []
    set_row(service, run_id, published_at=time.time() - REQUEUE_AFTER_S - 1)  # and that got lost
    assert lost(sweeper) == [(run_id, ENV)]


def test_a_dead_claimer_here_is_given_up_only_after_celery_had_time_to_hand_it_back(
        service: JobService, sweeper: Sweeper) -> None:
    run_id = submit(service)
    claimed(service, run_id, DEAD_HERE, ago_s=1)
    live = submit(service)
    claimed(service, live, process_token(), ago_s=1)  # this process: alive, but an earlier attempt
    assert lost(sweeper) == []  # both first seen gone now
    for key in sweeper.gone_since:  # as if HANDBACK_S had passed since
        sweeper.gone_since[key] -= HANDBACK_S + 1
    assert sorted(lost(sweeper)) == sorted([(run_id, ENV), (live, ENV)])


def test_a_sweep_heartbeats_publishes_the_lost_and_a_silent_worker_goes_stale(
        service: JobService, sweeper: Sweeper) -> None:
    run_id = submit(service)
    set_row(service, run_id, published_at=time.time() - REQUEUE_AFTER_S - 1)
    sweeper.tick()
    assert service.store.live_environments(service.settings.worker_stale_s) == {ENV: 1}
    assert queue_length(service.celery, ENV) == 2  # published again beside the first message
    row = service.store.run(job_of(service, run_id), run_id)
    assert row is not None and (row.published_at or 0.0) > time.time() - 5
    with service.store.engine.begin() as conn:  # the worker went silent
        conn.execute(schema.workers.update().values(
            heartbeat_at=time.time() - service.settings.worker_stale_s - 1))
    assert service.store.live_environments(service.settings.worker_stale_s) == {}
    sweeper.tick()  # it speaks again
    assert service.store.live_environments(service.settings.worker_stale_s) == {ENV: 1}
    sweeper.stop()
    assert service.store.live_environments(service.settings.worker_stale_s) == {}


def lane_length(service: JobService, timeout_s: int) -> int:
    """Messages waiting in the lane of runs with this time limit."""
    with service.celery.connection_for_read() as conn:
        declared = conn.default_channel.queue_declare(queue=queue_name(ENV, timeout_s),
                                                      durable=True, auto_delete=False)
        return int(declared.message_count)


def test_a_long_run_is_published_again_in_the_long_lane(
        service: JobService, sweeper: Sweeper) -> None:
    long_s = SHORT_RUN_S + 1
    run_id = submit(service, timeout_s=long_s)
    assert (lane_length(service, long_s), lane_length(service, TIMEOUT_S)) == (1, 0)
    set_row(service, run_id, published_at=time.time() - REQUEUE_AFTER_S - 1)
    sweeper.tick()
    assert (lane_length(service, long_s), lane_length(service, TIMEOUT_S)) == (2, 0)
    sweeper.stop()


def job_of(service: JobService, run_id: str) -> str:
    """The job a run belongs to."""
    with service.store.engine.connect() as conn:
        job_id: str = conn.execute(sa.select(schema.runs.c.job_id)
                                   .where(schema.runs.c.id == run_id)).scalar_one()
    return job_id
