"""The Celery application: Redis when REDIS_URL is set, else an embedded SQLite broker.

Every environment has its own queue, so a worker consumes exactly the
environments it has. Nothing is lost when a worker dies: messages are
acknowledged only after the run's result is stored (`acks_late`), a worker
process killed mid-run hands its message back (`task_reject_on_worker_lost`),
each worker process holds one message at a time (prefetch 1), and Redis hands
out an unacknowledged message again only after the longest allowed run.

Fairness: a worker runs one run per core at once (`worker_concurrency`, at least
two), and each environment has two lanes: runs whose time limit is at most
`SHORT_RUN_S` go to its short queue, longer ones to its long queue. A worker
consumes both, taking from them in turn (kombu cycles a consumer's queues), so
runs that may last half an hour never stand in front of a short one.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from celery import Celery
from kombu.transport import redis as redis_transport
from kombu.transport import sqlalchemy as sqla_transport
from kombu.transport import virtual
from sqlalchemy.exc import IntegrityError

from tvmrepro.settings import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, Settings

QUEUE_PREFIX = "tvmrepro."
LONG_LANE_SUFFIX = ".long"
# Runs with a time limit up to this (the default one) take the short lane; longer ones the long.
SHORT_RUN_S = DEFAULT_TIMEOUT_S
MIN_CONCURRENCY = 2  # one long run must never hold a whole worker
RUN_TASK = "tvmrepro.run"
# What a finisher that died left of a job (its comparisons, its bisection's step), taken by a
# worker's pool process: the recovery sweep that finds it runs in the main process, on the thread
# that heartbeats, and only publishes it. Every worker consumes this queue.
SETTLE_TASK = "tvmrepro.settle"
SETTLE_QUEUE = f"{QUEUE_PREFIX}settle"
EMBEDDED_POLLING_S = 0.1  # kombu polls SQL brokers; its default of 1 s doubles a short run
SQLITE_BROKER_BUSY_S = 30.0
REDIS_SOCKET_TIMEOUT_S = 10.0
BROKER_PING_S = 2.0
# After a pool process dies, how long Celery waits for a result it may still have sent before
# it hands the message back (Celery's default is 10 s; the store has the truth anyway).
WORKER_LOST_WAIT_S = 2.0
PUBLISH_RETRY = {"max_retries": 3, "interval_start": 0, "interval_step": 0.5, "interval_max": 2}


class _EmbeddedChannel(sqla_transport.Channel):
    """kombu's SQL channel, its one SQLAlchemy session used by one thread at a time.

    The session is not thread safe, and a worker uses it from two threads: its consumer
    polls (a get) while the pool's result thread hands a lost process's message back (a
    put); interleaved, the poll found the session 'prepared' and the worker stopped
    taking messages. A failed call rolls the session back, so the next one can use it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._session_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    def _locked(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self._session_lock:
            try:
                return method(*args, **kwargs)
            except Exception:
                with contextlib.suppress(Exception):
                    self.session.rollback()
                raise

    # kombu's SQL channel widens the abstract signature: its own is the one overridden.
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return self._locked(super()._put, queue, payload, **kwargs)

    def _get(self, queue: str) -> Any:  # type: ignore[override]  # (as the SQL channel's own)
        return self._locked(super()._get, queue)

    def _purge(self, queue: str) -> Any:
        return self._locked(super()._purge, queue)

    def _size(self, queue: str) -> Any:
        return self._locked(self._size_and_end, queue)

    def _size_and_end(self, queue: str) -> Any:
        # kombu's count leaves its read transaction open, and with it a pooled connection
        # until the channel is garbage-collected: the worker's recovery sweep, counting queues
        # on a fresh connection each time, emptied the pool (5 + 10) and the worker died.
        try:
            return super()._size(queue)
        finally:
            self.session.commit()

    def close(self) -> None:
        """Close the channel and its session: its connection goes back to the pool now."""
        with self._session_lock:
            if self._session is not None:
                with contextlib.suppress(Exception):
                    self._session.close()
                self._session = None
        super().close()

    def _get_or_create(self, queue: str) -> Any:
        # kombu looks for the queue's row, then inserts it: two processes (the API
        # publishing, a worker declaring) can both insert, and the second one fails.
        try:
            return super()._get_or_create(queue)
        except IntegrityError:
            self.session.rollback()
            return super()._get_or_create(queue)


class EmbeddedTransport(sqla_transport.Transport):
    """kombu's SQLAlchemy transport, polling more often, safe when processes race."""

    Channel = _EmbeddedChannel
    polling_interval = EMBEDDED_POLLING_S


class _AckTolerantQoS(redis_transport.QoS):
    """Frees the prefetch slot even when Redis is away at the acknowledgement.

    kombu's Redis QoS frees the slot only after Redis confirmed the ack; a run that
    ends while Redis restarts would keep the slot, and with prefetch 1 the worker
    would never take another message. The unacknowledged copy (if Redis kept it)
    comes back after the visibility timeout and is dropped: the run is done.
    """

    def ack(self, delivery_tag: Any) -> None:
        """Acknowledge; on a connection error, free the slot and re-raise."""
        try:
            super().ack(delivery_tag)
        except Exception:
            virtual.QoS.ack(self, delivery_tag)
            raise

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        """Reject; on a connection error, free the slot and re-raise."""
        try:
            super().reject(delivery_tag, requeue=requeue)
        except Exception:
            virtual.QoS.ack(self, delivery_tag)
            raise


class _RedisChannel(redis_transport.Channel):
    QoS = _AckTolerantQoS


class RedisTransport(redis_transport.Transport):
    """kombu's Redis transport with the QoS above."""

    Channel = _RedisChannel


def queue_name(env_id: str, timeout_s: int | None = None) -> str:
    """The queue of one environment's runs with this time limit (None: the short lane)."""
    lane = LONG_LANE_SUFFIX if timeout_s is not None and timeout_s > SHORT_RUN_S else ""
    return f"{QUEUE_PREFIX}{env_id}{lane}"


def queue_names(env_id: str) -> list[str]:
    """Both lanes of an environment (what its workers consume), the short one first."""
    return [queue_name(env_id), f"{queue_name(env_id)}{LONG_LANE_SUFFIX}"]


def worker_concurrency(settings: Settings, cores: int | None = None,
                       memory_bytes: int | None = None) -> int:
    """Runs at once for a worker: the setting, else one per core within the memory.

    At least MIN_CONCURRENCY, at most one per default memory limit of a run. Each run
    keeps its own limits; each pool process also keeps a warm sandbox per environment.
    """
    if settings.worker_concurrency:
        return settings.worker_concurrency
    cores = cores or len(os.sched_getaffinity(0))
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    by_memory = memory_bytes // (DEFAULT_MEMORY_MB * 2**20)
    return max(MIN_CONCURRENCY, min(cores, by_memory))


def _broker_options(settings: Settings) -> dict[str, Any]:
    if settings.redis_url:
        options: dict[str, Any] = {
            "visibility_timeout": settings.visibility_timeout_s,
            "socket_timeout": REDIS_SOCKET_TIMEOUT_S,
            "socket_connect_timeout": REDIS_SOCKET_TIMEOUT_S,
        }
        if settings.redis_prefix:
            options["global_keyprefix"] = settings.redis_prefix
        found: dict[str, Any] = {"broker_transport_options": options}
        if settings.redis_url.startswith("redis://"):  # rediss:// and sentinel keep kombu's own
            found["broker_transport"] = f"{__name__}:RedisTransport"
        return found
    return {
        "broker_url": settings.broker_url.removeprefix("sqla+"),
        "broker_transport": f"{__name__}:EmbeddedTransport",
        # Passed to create_engine by kombu: wait for a busy SQLite file instead of failing.
        "broker_transport_options": {"connect_args": {"timeout": SQLITE_BROKER_BUSY_S}},
    }


def make_celery(settings: Settings) -> Celery:
    """A Celery app for these settings (the task module is imported by workers only)."""
    settings.home.mkdir(parents=True, exist_ok=True)
    app = Celery("tvmrepro", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,  # results go to the job store, not to Celery
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=f"{QUEUE_PREFIX}default",
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a broker restart must not end the worker
        worker_cancel_long_running_tasks_on_connection_loss=False,
        worker_lost_wait=WORKER_LOST_WAIT_S,
        worker_enable_remote_control=False,  # no broadcast queues: nothing here uses them
        worker_hijack_root_logger=False,
        **_broker_options(settings),
    )
    app.conf.tvmrepro_settings = settings
    return app


def publish_run(app: Celery, run_id: str, env_id: str, timeout_s: int | None = None) -> None:
    """Put one stored run on its environment's queue, in the lane of its time limit."""
    app.send_task(RUN_TASK, args=[run_id], queue=queue_name(env_id, timeout_s), retry=True,
                  retry_policy=PUBLISH_RETRY)


def publish_settle(app: Celery, job_id: str) -> None:
    """Ask a worker's pool process to settle what a job's finisher left (SETTLE_TASK)."""
    app.send_task(SETTLE_TASK, args=[job_id], queue=SETTLE_QUEUE, retry=True,
                  retry_policy=PUBLISH_RETRY)


class StoredRun(Protocol):
    """What publishing a stored run needs of it (a RunRow)."""

    id: str
    environment: str
    timeout_s: int


def publish_runs(app: Celery, runs: Iterable[StoredRun]) -> None:
    """`publish_run` for each of these runs."""
    for run in runs:
        publish_run(app, run.id, run.environment, run.timeout_s)


def broker_ping(app: Celery, timeout_s: float = BROKER_PING_S) -> None:
    """Raise (kombu's OperationalError) unless the broker accepts a connection in time."""
    with app.connection_for_read(connect_timeout=timeout_s) as conn:
        conn.ensure_connection(max_retries=0, timeout=timeout_s)


def queue_length(app: Celery, env_id: str) -> int:
    """How many messages wait in an environment's lanes (0 also when the broker lost them)."""
    with app.connection_for_read(connect_timeout=BROKER_PING_S) as conn:
        # Fail fast when the broker is away: the caller may be the worker's event loop.
        conn.ensure_connection(max_retries=0, timeout=BROKER_PING_S)
        # Not passive: kombu's passive check misses queues under a global key prefix. For
        # kombu's virtual transports (Redis, SQL) declaring only counts; it binds nothing.
        channel = conn.default_channel
        return sum(int(channel.queue_declare(queue=name, durable=True,
                                             auto_delete=False).message_count)
                   for name in queue_names(env_id))


def _run_of(entry: bytes) -> tuple[str, str] | None:
    """(run id, queue) of one entry of Redis's unacknowledged set, None if not a run's."""
    try:
        message, _exchange, routing_key = json.loads(entry)
        body = message["body"]
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return str(args[0]), str(routing_key)
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def drop_finished_unacked(app: Celery, queues: set[str],
                          unfinished: Callable[[], set[str]]) -> int:
    """Remove from Redis's unacknowledged set the messages of `queues` whose run is finished.

    A worker killed mid-run, or an acknowledgement lost while Redis restarted, leaves its
    message there until the visibility timeout, when it would come back only to be dropped.
    The set is read before the store (`unfinished`: ids of the runs not done), so a message
    of a run stored after that read is never taken for a finished one. Redis only.
    """
    with app.connection_for_write(connect_timeout=BROKER_PING_S) as conn:
        conn.ensure_connection(max_retries=0, timeout=BROKER_PING_S)
        channel = conn.default_channel
        if not isinstance(channel, redis_transport.Channel):
            return 0
        client = channel.client
        # Through the index and HGET: kombu's key prefix covers those commands, not HGETALL.
        tags = client.zrange(channel.unacked_index_key, 0, -1)
        runs = {tag: _run_of(client.hget(channel.unacked_key, tag) or b"") for tag in tags}
        mine = {tag: run for tag, run in runs.items() if run is not None and run[1] in queues}
        if not mine:
            return 0
        waiting = unfinished()
        done = [tag for tag, (run_id, _) in mine.items() if run_id not in waiting]
        for tag in done:
            client.pipeline().zrem(channel.unacked_index_key, tag).hdel(
                channel.unacked_key, tag).execute()
        return len(done)



def _run_id_of(raw: bytes) -> str | None:
    """The run id of one waiting message of a queue (as kombu's Redis transport keeps it)."""
    try:
        message = json.loads(raw)
        body = message["body"]
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        return str(json.loads(body)[0][0])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def drop_waiting_messages(app: Celery, runs: Iterable[StoredRun]) -> int:
    """Remove the messages of these runs (ended without a worker: cancelled, expired) from their
    environments' queues; how many. A queue that no worker serves is never read, so its
    messages would stay in Redis for good. Redis only (the embedded broker: none removed)."""
    by_queue: dict[str, set[str]] = {}
    for run in runs:
        for name in queue_names(run.environment):
            by_queue.setdefault(name, set()).add(run.id)
    if not by_queue:
        return 0
    with app.connection_for_write(connect_timeout=BROKER_PING_S) as conn:
        conn.ensure_connection(max_retries=0, timeout=BROKER_PING_S)
        channel = conn.default_channel
        if not isinstance(channel, redis_transport.Channel):
            return 0
        client, dropped = channel.client, 0
        # kombu's key prefix does not cover LRANGE and LREM: the key is named whole.
        prefix = getattr(client, "global_keyprefix", "")
        for queue, ids in sorted(by_queue.items()):
            # Each waiting message read once; a message taken meanwhile is simply not found.
            for raw in client.lrange(f"{prefix}{queue}", 0, -1):
                if _run_id_of(raw) in ids:
                    dropped += int(client.lrem(f"{prefix}{queue}", 0, raw))
        return dropped


def broker_queue_lengths(app: Celery, names: Iterable[str]) -> dict[str, int] | None:
    """Queue name -> how many messages wait in it on Redis (every priority of it), in one
    round trip; None where the broker is not Redis (the embedded broker: the store counts)."""
    with app.connection_for_read(connect_timeout=BROKER_PING_S) as conn:
        conn.ensure_connection(max_retries=0, timeout=BROKER_PING_S)
        channel = conn.default_channel
        if not isinstance(channel, redis_transport.Channel):
            return None
        keys = {name: [channel._q_for_pri(name, pri) for pri in channel.priority_steps]
                for name in names}
        # LLEN is one of the commands kombu's key prefix covers: the names go as they are.
        with channel.client.pipeline() as pipe:
            for name_keys in keys.values():
                for key in name_keys:
                    pipe.llen(key)
            sizes = iter(pipe.execute())
        return {name: sum(int(next(sizes) or 0) for _ in name_keys)
                for name, name_keys in keys.items()}
