"""The hostile suite's service: a private Redis, real API and workers, on each runtime.

Each runtime's part runs against a service of its own (tests.service.stack: the
API under gunicorn and a Celery worker as subprocesses, the SQLite store in a
home of its own) on one private redis-server (its own port and directory, so
that the suite can kill and restart it without touching the machine's Redis).
Every check records a row in the ledger (tests/fixtures/ledger.py), printed at the end.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import NEW_ENV
from tests.service.stack import Backend, OwnRedis, Stack, make_home
from tvmrepro.environments import Environment, default_catalog
from worker.environments.images import build_environment_image

MAX_QUEUED = 30  # the API's cap on waiting runs (the burst goes past it)


class PrivateRedis(OwnRedis):
    """A redis-server of the suite's own, with an append-only file synced at every write."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.args[self.args.index("--appendonly") + 1] = "yes"
        self.args += ["--appendfsync", "always"]  # what it acknowledged survives a kill -9

    def kill(self) -> None:
        """kill -9 it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def client(self) -> redis.Redis:
        """A client of it."""
        return redis.Redis.from_url(self.url, socket_timeout=5)


@pytest.fixture(scope="session")
def private_redis() -> Iterator[PrivateRedis]:
    """The suite's redis-server, removed with its files at the end."""
    root = Path(tempfile.mkdtemp(prefix="tvmrepro-hostile-redis-"))
    server = PrivateRedis(root)
    server.start()
    yield server
    server.kill()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def hostile_docker_env(request: pytest.FixtureRequest) -> Environment:
    """The one environment of the Docker part, its image built offline on the private engine."""
    env = default_catalog().get(NEW_ENV)
    client, settings = (request.getfixturevalue(n) for n in ("docker_client", "docker_settings"))
    build_environment_image(client, settings, env, request.getfixturevalue("wheelhouse"),
                            request.getfixturevalue("base_image"))
    return env


def make_stack(runtime: str, request: pytest.FixtureRequest, private_redis: PrivateRedis,
               root: Path, test_home: Path) -> Stack:
    """A stack on the private Redis for one runtime (its API and one worker started)."""
    overrides = {"TVMREPRO_MAX_QUEUED_RUNS": str(MAX_QUEUED), "TVMREPRO_RUNTIME": runtime}
    if runtime == "docker":
        settings = request.getfixturevalue("docker_settings")
        request.getfixturevalue("hostile_docker_env")
        overrides["DOCKER_HOST"] = str(settings.docker_host)
    backend = Backend("redis+sqlite", private_redis.url, None, f"hostile-{runtime}:")
    stack = Stack(backend, make_home(root, test_home), **overrides)
    stack.start_api()
    stack.start_worker(NEW_ENV)
    return stack
