"""Fixtures for the service: real Redis, real PostgreSQL, real stacks.

Test runs may overlap on one machine (two people, or CI beside a developer),
so nothing is shared between them: Redis is database 13 of 127.0.0.1:6379
(TVMREPRO_TEST_REDIS_URL) with a key prefix of this test's own, whose keys are
deleted after it (no database is flushed); PostgreSQL is a database of this
test session's own on 127.0.0.1:5432, dropped at its end.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from tests.conftest import NEW_ENV, OLD_ENV, shared_case
from tests.service.stack import Backend, Stack, make_home
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from tvmrepro.store import Store

REDIS_URL = os.environ.get("TVMREPRO_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
PG_SERVER = os.environ.get("TVMREPRO_TEST_PG_SERVER", "postgresql://postgres@127.0.0.1:5432")
BACKENDS = ("embedded", "redis+postgres")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A database of this session's own (TVMREPRO_TEST_DATABASE_URL: that one instead)."""
    if url := os.environ.get("TVMREPRO_TEST_DATABASE_URL"):
        yield url
        return
    name = f"tvmrepro_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        _drop_abandoned(conn)
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{PG_SERVER.replace('postgresql://', 'postgresql+psycopg://')}/{name}"
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _drop_abandoned(conn: psycopg.Connection[Any]) -> None:
    """Drop the databases of earlier sessions of this machine whose process is gone."""
    from tvmrepro.liveness import pid_alive

    rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'tvmrepro_test_%'")
    for (name,) in rows.fetchall():
        pid = name.split("_")[2]
        if pid.isdigit() and not pid_alive(int(pid)):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _clean_postgres(url: str) -> None:
    store = Store(url)
    store.drop_schema()
    store.dispose()


def delete_prefixed(url: str, prefix: str) -> None:
    """Delete every key under `prefix` in the Redis at `url` (and nothing else)."""
    client = redis.Redis.from_url(url)
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A Redis key prefix of this test's own; its keys are deleted after the test."""
    prefix = f"tvmrepro-test-{uuid.uuid4().hex[:12]}:"
    yield prefix
    delete_prefixed(REDIS_URL, prefix)


@pytest.fixture
def clean_postgres(postgres_url: str) -> Iterator[str]:
    """The session's database, with no tables of ours before and after the test."""
    _clean_postgres(postgres_url)
    yield postgres_url
    _clean_postgres(postgres_url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each service test runs twice: embedded broker and SQLite, then Redis and PostgreSQL."""
    if request.param == "embedded":
        return Backend("embedded")
    return Backend("redis+postgres", REDIS_URL, request.getfixturevalue("clean_postgres"),
                   request.getfixturevalue("redis_prefix"))


@pytest.fixture
def stack(backend: Backend, tmp_path: Path, test_home: Path,
          tvm_envs: dict[str, Environment]) -> Iterator[Stack]:
    """A stack (nothing started yet) on the backend; everything it started is stopped after."""
    running = Stack(backend, make_home(tmp_path, test_home))
    yield running
    running.close()


@pytest.fixture(scope="session")
def founding_case() -> dict[str, Any]:
    """apache/tvm#17357 as a case (two variants)."""
    data: dict[str, Any] = json.loads(shared_case("tvm-17357/case.json").read_text())
    return data


@pytest.fixture(scope="session")
def local_cells(founding_case: dict[str, Any], tvm_envs: dict[str, Environment],
                settings: Settings) -> dict[tuple[str, str], dict[str, Any]]:
    """The founding case run here without the service: (variant, env) -> result."""
    from worker.runner import run_variant
    from worker.runtimes.local import LocalRuntime

    case = parse_case(founding_case)
    runtime = LocalRuntime(settings)
    return {(variant, env_id): run_variant(case, variant, tvm_envs[env_id], runtime).to_json()
            for variant in case.variant_names for env_id in (OLD_ENV, NEW_ENV)}
