"""Fixtures for the service: the API in process (Flask's test client), and real stacks on the
embedded backend or on Redis and PostgreSQL (tests/fixtures/databases.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV, case_path
from tests.fakes.runtime import FakeRuntime
from tests.fixtures.databases import REDIS_URL, own_database, own_prefix
from tests.service.in_process import SMALL_LIMIT
from tests.service.stack import Backend, Stack, make_home
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings

BACKENDS = ("embedded", "redis+postgres")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each service test runs twice: embedded broker and SQLite, then Redis and PostgreSQL."""
    if request.param == "embedded":
        return Backend("embedded")
    return Backend("redis+postgres", REDIS_URL, request.getfixturevalue("clean_postgres"),
                   request.getfixturevalue("redis_prefix"))


@contextlib.contextmanager
def own_backend(name: str) -> Iterator[Backend]:
    """A backend of the caller's own: embedded, or a database and Redis keys removed at the end."""
    if name == "embedded":
        yield Backend("embedded")
        return
    with own_database() as url, own_prefix() as prefix:
        yield Backend("redis+postgres", REDIS_URL, url, prefix)


@pytest.fixture(scope="module", params=BACKENDS)
def module_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A backend for a stack that a module's tests share (they only submit and read). A
    module's tests run in one xdist worker (tests/conftest.py), so one stack serves them all."""
    with own_backend(request.param) as backend:
        yield backend


def tagged(case: dict[str, Any], tag: str) -> dict[str, Any]:
    """The case with a comment of its own at the end of its source: a cache key no other
    submission to a shared stack has (the runs are fresh; what they do is the same)."""
    return {**case, "source": f"{case['source'].rstrip()}\n# {tag}\n"}


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
    data: dict[str, Any] = json.loads(case_path("tvm-17357/case.json").read_text())
    return data


@pytest.fixture(scope="session")
def local_cells(founding_case: dict[str, Any], tvm_envs: dict[str, Environment],
                warm_runtime: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """The founding case run here without the service: (variant, env) -> result."""
    from worker.runner import run_variant

    case = parse_case(founding_case)
    return {(variant, env_id): run_variant(case, variant, tvm_envs[env_id], warm_runtime).to_json()
            for variant in case.variant_names for env_id in (OLD_ENV, NEW_ENV)}


def app_knowing_both(settings: Settings) -> Iterator[Flask]:
    """An app with these settings whose store knows the passes of the two environments, as a
    worker records them (no TVM needed); its store is closed after."""
    app = create_app(settings)
    service: JobService = app.extensions["tvmrepro"]
    for env_id in (OLD_ENV, NEW_ENV):
        fake = FakeRuntime(settings)  # what a worker records, without provisioning TVM
        service.store.save_fingerprint(env_id, fake.fingerprint(default_catalog().get(env_id)))
    yield app
    service.store.dispose()


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    """An app on a fresh home, knowing the passes of the two environments (no TVM needed)."""
    yield from app_knowing_both(Settings.from_env({
        "TVMREPRO_HOME": str(tmp_path), "TVMREPRO_MAX_REQUEST_BYTES": str(SMALL_LIMIT)}))


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """Flask's test client of the app."""
    return app.test_client()
