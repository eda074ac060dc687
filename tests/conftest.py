"""Shared fixtures: a TVMREPRO_HOME for the test session and provisioned TVM environments.

Environments are real (apache-tvm from PyPI, made by `worker.provision`) and
kept between test sessions in TVMREPRO_TEST_HOME (default
~/.cache/tvmrepro-test): provisioning is idempotent, so a second session
reuses them and only the first one pays for the download.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings

# Session fixtures every directory may use, loaded once (tests/fixtures/__init__.py says why).
pytest_plugins = ["tests.fixtures.docker_engine", "tests.fixtures.databases"]

# The two environments the founding case was measured on (../shared/cases/tvm-17357).
OLD_ENV, NEW_ENV = "tvm-0.25.0-cpu", "tvm-0.27.0.post1-cpu"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REPO = Path(__file__).resolve().parents[1]


def shared_case(name: str) -> Path:
    """A case file (e.g. 'tvm-17357/case.json'): ../shared/cases, else the copy in tests/cases."""
    for root in (SHARED / "cases", REPO / "tests" / "cases"):
        if (root / name).exists():
            return root / name
    raise FileNotFoundError(f"case {name} is neither in ../shared/cases nor in tests/cases")


@pytest.fixture(scope="session")
def test_home() -> Path:
    """TVMREPRO_HOME for the whole session (environments persist across sessions)."""
    home = Path(os.environ.get("TVMREPRO_TEST_HOME", Path.home() / ".cache" / "tvmrepro-test"))
    home.mkdir(parents=True, exist_ok=True)
    return home


@pytest.fixture(scope="session")
def settings(test_home: Path) -> Settings:
    """Settings pointing at the test home."""
    return Settings.from_env({"TVMREPRO_HOME": str(test_home)})


@pytest.fixture(scope="session")
def tvm_envs(settings: Settings) -> dict[str, Environment]:
    """The two founding-case environments, provisioned (real TVM)."""
    from worker.provision import provision

    catalog = default_catalog()
    envs = {env_id: catalog.get(env_id) for env_id in (OLD_ENV, NEW_ENV)}
    for env in envs.values():
        provision(settings, env)
    return envs


@pytest.fixture
def home_env(test_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point TVMREPRO_HOME at the test home for code that reads the process environment."""
    monkeypatch.setenv("TVMREPRO_HOME", str(test_home))
    yield test_home
