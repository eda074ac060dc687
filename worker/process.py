"""A worker process: make its environments, tell the store what they have, consume their queues."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from tvmrepro.environments import Environment
from tvmrepro.errors import ReproError
from tvmrepro.queue import make_celery, queue_name
from tvmrepro.settings import Settings
from tvmrepro.store import Store, open_store
from worker.provision import provision, read_fingerprint
from worker.recovery import Recovery
from worker.runtimes import make_runtime

log = logging.getLogger(__name__)
# What the API needs of a fingerprint: pass names validate cases; the rest is shown.
FINGERPRINT_FIELDS = ("version", "python", "libinfo", "passes")


def _facts(settings: Settings, env: Environment) -> dict[str, Any] | None:
    if settings.runtime == "local":
        return provision(settings, env)
    # Another runtime (Docker) knows its environments from their images.
    probe = getattr(make_runtime(settings.runtime, settings), "fingerprint", None)
    try:
        return probe(env) if callable(probe) else read_fingerprint(settings, env)
    except ReproError as exc:
        log.warning("no fingerprint for %s (%s): its pass names go unchecked", env.id, exc)
        return None


def prepare(settings: Settings, envs: list[Environment], store: Store) -> None:
    """Provision (local runtime) and record each environment's fingerprint in the store."""
    for env in envs:
        facts = _facts(settings, env)
        if facts:
            store.save_fingerprint(env.id, {k: facts.get(k) for k in FINGERPRINT_FIELDS})


def run_worker(settings: Settings, envs: list[Environment], concurrency: int | None = None,
               loglevel: str = "INFO") -> None:
    """Serve `envs` until stopped (blocks); runs go through the configured runtime."""
    store = open_store(settings.store_url)
    prepare(settings, envs, store)
    store.dispose()
    app = make_celery(settings)
    app.conf.tvmrepro_environments = [env.id for env in envs]
    app.conf.include = ["worker.tasks"]
    app.steps["worker"].add(Recovery)
    queues = ",".join(queue_name(env.id) for env in envs)
    nodename = f"tvmrepro-{os.getpid()}@{socket.gethostname()}"
    log.info("worker %s serves %s", nodename, queues)
    app.worker_main([
        "worker", "--queues", queues, "--hostname", nodename, "--pool", "prefork",
        "--concurrency", str(concurrency or settings.worker_concurrency),
        "--loglevel", loglevel, "--without-mingle", "--without-gossip", "--without-heartbeat",
    ])
