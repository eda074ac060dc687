"""A worker builds the images its environments lack when it starts (Docker runtime).

A worker whose environments have no current image (the pins and harness that
worker/environments/images.py checks) builds them itself, one at a time, through the engine
it already holds, from the pins of images/environments.toml: offline from
TVMREPRO_WHEELHOUSE when that holds wheels, on TVMREPRO_BASE_IMAGE when one is
set. Meanwhile it serves them: its heartbeat lists them, so jobs for them are
accepted and wait in their queues, and says each build's current step
(GET /api/v1/environments: `building`). Once an image is made the worker
records its fingerprint and starts consuming its queues (Celery's own
add-consumer, in the consumer's thread). A build that fails is logged and
the environment served anyway: its runs end as infra_error naming the image.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from celery import bootsteps

from tvmrepro.environments import Environment
from tvmrepro.errors import ReproError
from tvmrepro.queue import queue_names
from tvmrepro.settings import Settings
from tvmrepro.store import Store
from worker.environments.fingerprints import prepare
from worker.environments.images import build_environment_image, current_image

log = logging.getLogger(__name__)
STEP_CHARS = 160  # a build step as shown (its Dockerfile line can be long)
CONSUME_CHECK_S = 1.0  # how often the event loop looks for images just built


class Builds:
    """The images a worker is building: each one's current step, and those just finished.

    Shared by the building thread, the heartbeat and the worker's event loop.
    """

    def __init__(self, envs: Iterable[Environment]) -> None:
        self.envs = list(envs)
        self._lock = threading.Lock()
        self._steps = {env.id: "waiting for the builds before it" for env in self.envs}
        self._finished: list[str] = []

    def __contains__(self, env_id: object) -> bool:
        return any(env.id == env_id for env in self.envs)

    def step(self, env_id: str, text: str) -> None:
        """Record the current step of env_id's build."""
        with self._lock:
            self._steps[env_id] = text[:STEP_CHARS]

    def finish(self, env_id: str) -> None:
        """env_id's build is over (made or failed): serve it."""
        with self._lock:
            self._steps.pop(env_id, None)
            self._finished.append(env_id)

    def steps(self) -> dict[str, str]:
        """Environment id -> its build's current step, for every build not over yet."""
        with self._lock:
            return dict(self._steps)

    def take_finished(self) -> list[str]:
        """The environments whose builds ended since the last call."""
        with self._lock:
            finished, self._finished = self._finished, []
            return finished


def missing_images(settings: Settings, envs: list[Environment]) -> list[Environment]:
    """The environments whose image is absent or not current (none but for the Docker runtime)."""
    if settings.runtime != "docker":
        return []
    from worker.runtimes.docker import connect

    client = connect(settings)
    return [env for env in envs if current_image(client, env) is None]


def _wheelhouse(settings: Settings) -> Path | None:
    # An empty wheelhouse (compose mounts an empty volume when none is given) means online.
    found = settings.wheelhouse
    return found if found is not None and any(found.glob("*.whl")) else None


def build_one(client: Any, settings: Settings, env: Environment, builds: Builds) -> bool:
    """Build env's image, reporting its steps; False (logged) when the build failed."""
    wheelhouse = _wheelhouse(settings)
    log.info("building image %s for %s (%s)", env.image, env.id,
             f"offline from {wheelhouse}" if wheelhouse else "online")
    builds.step(env.id, "starting the build")

    def progress(line: str) -> None:
        if line.startswith("Step "):  # "Step 3/12 : RUN ...": the engine's own count
            builds.step(env.id, line)
            log.info("%s: %s", env.id, line[:STEP_CHARS])

    try:
        built = build_environment_image(client, settings, env, wheelhouse, settings.base_image,
                                        log=progress)
    except ReproError as exc:
        log.error("building image %s failed (its runs end as infra_error until it is built): %s",
                  env.image, exc)
        return False
    log.info("image %s built in %.0f s", built.tag, built.seconds)
    return True


def _record_fingerprint(settings: Settings, env: Environment) -> None:
    from worker.runtimes.docker import DockerRuntime

    store = Store(settings.store_url, pooled=False, artifacts=settings.artifacts_dir)
    try:
        prepare(DockerRuntime(settings), [env], store)
    finally:
        store.dispose()


def build_all(settings: Settings, builds: Builds) -> None:
    """Build every image in `builds`, in order; each environment is served once its build ends."""
    from worker.runtimes.docker import connect

    client = connect(settings)
    for env in builds.envs:
        if build_one(client, settings, env, builds):
            builds.step(env.id, "reading the TVM of the new image")
            _record_fingerprint(settings, env)
        builds.finish(env.id)


def consume_queues(consumer: Any, env_id: str, why: str = "") -> None:
    """Take env_id's queues (in the consumer's own thread: its connection is not to be used
    from two)."""
    for queue in queue_names(env_id):
        consumer.add_task_queue(queue)
    log.info("serving %s%s", env_id, why)


class BuildImages(bootsteps.StartStopStep):
    """Builds the missing images in a thread; consumes each one's queues once it is made."""

    # After the pool: its processes are forked before the building thread exists.
    requires = {"celery.worker.components:Timer", "celery.worker.components:Pool"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None

    def start(self, parent: Any) -> None:
        """Start building, and look for finished builds on the worker's timer."""
        conf = parent.app.conf
        builds: Builds | None = conf.get("tvmrepro_builds")
        if builds is None or not builds.envs:
            return
        threading.Thread(target=build_all, args=(conf.tvmrepro_settings, builds),
                         name="image-builds", daemon=True).start()
        self.tref = parent.timer.call_repeatedly(CONSUME_CHECK_S, self.consume_finished,
                                                 (parent, builds))

    def consume_finished(self, parent: Any, builds: Builds) -> None:
        """Consume the queues of the environments whose builds ended."""
        consumer = getattr(parent, "consumer", None)
        if consumer is None or consumer.task_consumer is None:
            return  # not consuming yet: the builds wait for the next look
        for env_id in builds.take_finished():
            # This look runs in the timer's thread; the consumer's connection is not to be used
            # from two threads (the embedded broker's one session, mid-poll, stops the worker):
            # it takes the queues itself, between two polls.
            consumer.call_soon(consume_queues, consumer, env_id)

    def stop(self, parent: Any) -> None:
        """Stop looking (a build under way ends with the process)."""
        if self.tref is not None:
            self.tref.cancel()
