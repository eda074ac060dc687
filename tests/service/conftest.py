"""Fixtures for the service: real Redis (its own database number), real PostgreSQL, real stacks.

Redis: database 13 of 127.0.0.1:6379 (TVMREPRO_TEST_REDIS_URL), flushed before
and after each test that uses it; no other database is touched. PostgreSQL:
database `tvmrepro_test` on 127.0.0.1:5432 (TVMREPRO_TEST_DATABASE_URL),
created when missing, its tables dropped after each test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from service.store import Store
from tests.conftest import NEW_ENV, OLD_ENV, shared_case
from tests.service.stack import Backend, Stack, make_home
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings

REDIS_URL = os.environ.get("TVMREPRO_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
PG_SERVER = os.environ.get("TVMREPRO_TEST_PG_SERVER", "postgresql://postgres@127.0.0.1:5432")
PG_DATABASE = "tvmrepro_test"
BACKENDS = ("embedded", "redis+postgres")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test database's URL (created when missing)."""
    if url := os.environ.get("TVMREPRO_TEST_DATABASE_URL"):
        return url
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                              (PG_DATABASE,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')
    return f"{PG_SERVER.replace('postgresql://', 'postgresql+psycopg://')}/{PG_DATABASE}"


def _clean_postgres(url: str) -> None:
    store = Store(url)
    store.drop_schema()
    store.dispose()


@pytest.fixture
def clean_redis() -> Iterator[str]:
    """REDIS_URL of the dedicated test database, empty before and after the test."""
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture
def clean_postgres(postgres_url: str) -> Iterator[str]:
    """The test database's URL, with no tables of ours before and after the test."""
    _clean_postgres(postgres_url)
    yield postgres_url
    _clean_postgres(postgres_url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each service test runs twice: embedded broker and SQLite, then Redis and PostgreSQL."""
    if request.param == "embedded":
        return Backend("embedded")
    return Backend("redis+postgres", request.getfixturevalue("clean_redis"),
                   request.getfixturevalue("clean_postgres"))


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
