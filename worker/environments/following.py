"""A worker that serves the environments provisioned on its home serves new ones too.

`tvmrepro up` and `tvmrepro worker` with `--also-provisioned` serve every CPU environment
provisioned on their home (without it, the default set or `--env`'s only). One provisioned while it runs
(`tvmrepro env provision ENV` in another terminal) is served within a look or two,
without a restart: the worker records its fingerprint (the API checks pass names
with it), lists it in its heartbeat (the API then accepts its jobs) and consumes its
queues (Celery's own add-consumer, in the consumer's thread). Its runs start cold
sandboxes (the warm ones are started for the environments served at the start).

Only the local runtime follows: the Docker runtime runs from images, and a local
provisioning makes none.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps

from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings
from tvmrepro.store import Store
from worker.environments.building import consume_queues
from worker.environments.fingerprints import prepare
from worker.environments.provision import provisioned
from worker.recovery import record_heartbeat
from worker.runtimes import make_runtime

log = logging.getLogger(__name__)
LOOK_S = 2.0  # how often the worker looks for environments provisioned since the last look


def newly_provisioned(settings: Settings, served: list[str]) -> list[Environment]:
    """The CPU environments provisioned here that the worker does not serve yet."""
    return [env for env in provisioned(settings, default_catalog().select(None, "cpu"))
            if env.id not in served]


def _record_fingerprints(settings: Settings, envs: list[Environment]) -> None:
    store = Store(settings.store_url, pooled=False, artifacts=settings.artifacts_dir)
    runtime = make_runtime(settings.runtime, settings)
    try:
        # The local runtime's fingerprint of a provisioned environment is its file: no build.
        prepare(runtime, envs, store)
    finally:
        runtime.close()  # its cgroup, made as root
        store.dispose()


def _consume(consumer: Any, settings: Settings, envs: list[Environment],
             served: list[str]) -> None:
    """Consume envs' queues and say so in a heartbeat (in the consumer's own thread)."""
    for env in envs:
        consume_queues(consumer, env.id, " (provisioned on this home since the worker started)")
        served.append(env.id)
    store = Store(settings.store_url, pooled=False, artifacts=settings.artifacts_dir)
    try:
        record_heartbeat(consumer.app, store, served)  # the API accepts its jobs from now on
    finally:
        store.dispose()


class FollowProvisioned(bootsteps.StartStopStep):
    """Looks for newly provisioned environments on the worker's timer and serves them."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None
        self.pending = False  # environments handed to the consumer, not taken yet

    def start(self, parent: Any) -> None:
        """Look every LOOK_S, when this worker follows its home's provisioned environments."""
        if parent.app.conf.get("tvmrepro_follow_provisioned"):
            self.tref = parent.timer.call_repeatedly(LOOK_S, self.look, (parent,))

    def look(self, parent: Any) -> None:
        """Serve what was provisioned since the last look; a failure is logged and the next
        look tries again."""
        consumer = getattr(parent, "consumer", None)
        if consumer is None or consumer.task_consumer is None or self.pending:
            return  # not consuming yet, or the last ones not taken yet: the next look
        conf = parent.app.conf
        settings: Settings = conf.tvmrepro_settings
        # The worker's one list of served environments: the recovery sweep's heartbeat and its
        # republishing read it too, so it grows in place.
        served: list[str] = conf.tvmrepro_environments
        try:
            new = newly_provisioned(settings, served)
            if not new:
                return
            _record_fingerprints(settings, new)
        except Exception:
            log.exception("could not serve the environments provisioned since the last look")
            return
        self.pending = True

        def consume() -> None:
            try:
                _consume(consumer, settings, new, served)
            finally:
                self.pending = False

        # This look runs in the timer's thread. The consumer's connection is not to be used
        # from two threads (the embedded broker's one session would be, mid-poll): it takes the
        # queues itself, between two polls.
        consumer.call_soon(consume)

    def stop(self, parent: Any) -> None:
        """Stop looking."""
        if self.tref is not None:
            self.tref.cancel()
