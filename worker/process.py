"""A worker process: make its environments, tell the store what they have, consume their queues."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time

from tvmrepro.environments import Environment
from tvmrepro.queue import SETTLE_QUEUE, make_celery, queue_names, worker_concurrency
from tvmrepro.settings import Settings
from tvmrepro.store import open_store
from worker.environments.building import BuildImages, Builds, missing_images
from worker.environments.fingerprints import prepare
from worker.environments.following import FollowProvisioned
from worker.environments.provision import provision, read_fingerprint
from worker.recovery import Recovery
from worker.runtimes import make_runtime
from worker.stopping import install as install_prompt_stop

log = logging.getLogger(__name__)


def provisioning_notice(settings: Settings, envs: list[Environment]) -> str | None:
    """What a starting worker says when it must provision environments before it serves any
    (the local runtime); None when all are there."""
    missing = [env.id for env in envs if read_fingerprint(settings, env) is None]
    if settings.runtime != "local" or not missing:
        return None
    return (f"worker: provisioning {', '.join(missing)} before serving anything (a ~100 MB "
            f"download each the first time, seconds each from the package cache)")


def make_flavours(settings: Settings, envs: list[Environment]) -> threading.Thread | None:
    """Make the frontend flavours of `envs` that are missing, in a thread of their own: the
    worker serves meanwhile, and a torch or onnx report that comes first waits for its own
    (provisioning's lock) or makes it. Each says what it installs, and when it is ready."""
    missing = [env.with_frontends() for env in envs if env.frontend_packages
               and read_fingerprint(settings, env.with_frontends()) is None]
    if settings.runtime != "local" or not missing:
        return None

    def make() -> None:
        for env in missing:
            pins = ", ".join(f"{name} {env.frontend_packages[name]}"
                             for name in env.frontend_modules if name in env.frontend_packages)
            print(f"worker: installing {pins} for the torch and onnx reports of {env.id} "
                  f"(once; the worker serves meanwhile)", file=sys.stderr, flush=True)
            started = time.monotonic()
            try:
                provision(settings, env)
            except Exception as exc:  # its reports make it again, and say why with their run
                print(f"worker: the frontend packages of {env.id} failed: {exc}",
                      file=sys.stderr, flush=True)
                continue
            print(f"worker: frontend packages of {env.id} ready "
                  f"({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)

    thread = threading.Thread(target=make, name="frontend-flavours", daemon=True)
    thread.start()
    return thread


def run_worker(settings: Settings, envs: list[Environment], concurrency: int | None = None,
               loglevel: str = "INFO", follow_provisioned: bool = False,
               frontends: bool = False) -> None:
    """Serve `envs` until stopped (blocks); runs go through the configured runtime.

    `follow_provisioned`: also serve each CPU environment provisioned on this home while the
    worker runs (worker.environments.following; the local runtime only). `frontends`: make
    their frontend flavours now, beside the serving, not at the first report that needs one."""
    store = open_store(settings.store_url, artifacts=settings.artifacts_dir)
    # Images the engine lacks are built once the worker runs (worker.environments.building); their
    # environments are served meanwhile, and their queues consumed once the image is made.
    builds = Builds(missing_images(settings, envs))
    # One runtime (one engine connection, one container sweep) for all the environments;
    # each pool process makes its own after the fork (worker.tasks.context).
    ready = [env for env in envs if env.id not in builds]
    notice = provisioning_notice(settings, ready)
    if notice:  # before Celery's logging exists: a minute of silence otherwise
        print(notice, file=sys.stderr, flush=True)
    prepare(make_runtime(settings.runtime, settings), ready, store)
    store.dispose()
    if frontends:
        make_flavours(settings, ready)
    app = make_celery(settings)
    app.conf.tvmrepro_environments = [env.id for env in envs]
    # Runs it takes at once, as its heartbeat records them (tvmrepro.jobs.release's window).
    app.conf.tvmrepro_concurrency = concurrency or worker_concurrency(settings)
    app.conf.tvmrepro_builds = builds
    app.conf.tvmrepro_follow_provisioned = follow_provisioned and settings.runtime == "local"
    app.conf.include = ["worker.tasks", "worker.github"]
    app.steps["worker"].add(Recovery)
    app.steps["worker"].add(BuildImages)
    app.steps["worker"].add(FollowProvisioned)
    install_prompt_stop()  # a stop does not wait out a broker poll (worker/stopping.py)
    # Both lanes of each environment, and what the recovery sweeps hand to a pool process.
    queues = ",".join([SETTLE_QUEUE, *(name for env in ready for name in queue_names(env.id))])
    nodename = f"tvmrepro-{os.getpid()}@{socket.gethostname()}"
    log.info("worker %s serves %s", nodename, queues)
    try:
        app.worker_main([
            # With every image still to build: the settle queue alone, until they are made.
            "worker", "--queues", queues, "--hostname", nodename,
            "--pool", "prefork",
            "--concurrency", str(concurrency or settings.worker_concurrency),
            "--loglevel", loglevel, "--without-mingle", "--without-gossip", "--without-heartbeat",
        ])
    finally:
        _sweep_at_stop(settings)


def _sweep_at_stop(settings: Settings) -> None:
    """After a stop the pool processes are gone: what they left (a warm container or a sandbox
    directory of a process that did not get to close its runtime) is removed now, not at the
    next start (a runtime sweeps what dead processes of this host own when it is made)."""
    try:
        make_runtime(settings.runtime, settings)  # making a runtime is its sweep
    except Exception:  # the engine may be gone with the host's shutdown: the next start sweeps
        log.exception("could not sweep the sandboxes left at the stop")
