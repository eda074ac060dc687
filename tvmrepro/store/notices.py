"""The store's change notices on Redis: after each committed write that changes a job's view
(tvmrepro/store/base.py `changed`), a message naming the job on one pub/sub channel, so that
an API process wakes the long-polls that wait on it without asking the store (service/waiting.py).

A notice is a hint, not the truth: a publisher that died after its commit, or a Redis that
restarted under a subscriber, loses it. The truth is the job's revision in the store, which the
listener's side reads again every so often whatever it hears. Where the broker is not Redis,
there are no notices: the API reads the revisions of the jobs it waits on at a short tick.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import redis

log = logging.getLogger(__name__)
CHANNEL = "tvmrepro.jobs.changed"  # after the deployment's key prefix: pub/sub ignores db numbers
PUBLISH_TIMEOUT_S = 1.0  # a store write waits no longer for its notice: the revision holds it
LISTEN_POLL_S = 1.0  # how long the listener blocks for a message before it checks its link
HEALTH_CHECK_S = 10  # an idle subscription is pinged after this long (a dead link is seen)
RECONNECT_S = 1.0
SCHEMES = ("redis://", "rediss://", "unix://")  # what redis-py opens (not kombu's sentinel://)


def notices_for(redis_url: str | None, prefix: str = "") -> JobNotices | None:
    """The notices of a deployment whose broker is at `redis_url` (None: no Redis, or one that
    only kombu reaches: the revisions are read at a tick instead)."""
    if not redis_url or not redis_url.startswith(SCHEMES):
        return None
    return JobNotices(redis_url, prefix)


class JobNotices:
    """Publishes a notice per changed job (a store's `notices`), and listens to them."""

    def __init__(self, redis_url: str, prefix: str = "") -> None:
        self.url, self.channel = redis_url, prefix + CHANNEL
        self.client = redis.Redis.from_url(redis_url, socket_timeout=PUBLISH_TIMEOUT_S,
                                           socket_connect_timeout=PUBLISH_TIMEOUT_S)

    def __call__(self, job_ids: set[str]) -> None:
        """Announce that these jobs changed; a Redis away is logged, never raised (the write is
        committed: the listeners' slow check of the revisions sees it)."""
        try:
            for job_id in sorted(job_ids):
                self.client.publish(self.channel, job_id)
        except redis.RedisError as exc:
            log.warning("no change notice for %d jobs (Redis: %s)", len(job_ids), exc)

    def listen(self, heard: Callable[[str], None]) -> None:
        """Call `heard(job_id)` for each notice, for good (a thread's loop): a lost link is
        subscribed again after RECONNECT_S (what was published meanwhile is lost)."""
        while True:
            try:
                self._subscribed(heard)
            except (redis.RedisError, OSError) as exc:
                log.warning("change notices lost (Redis: %s); subscribing again", exc)
                time.sleep(RECONNECT_S)

    def _subscribed(self, heard: Callable[[str], None]) -> None:
        client = redis.Redis.from_url(self.url, health_check_interval=HEALTH_CHECK_S,
                                      socket_connect_timeout=RECONNECT_S * 5,
                                      socket_keepalive=True)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(self.channel)
            while True:
                message = pubsub.get_message(timeout=LISTEN_POLL_S)
                if message is not None and message["type"] == "message":
                    heard(message["data"].decode("utf-8", "replace"))
        finally:
            pubsub.close()
            client.close()
