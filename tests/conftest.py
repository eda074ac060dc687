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
from typing import Any

import pytest

from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings

# Session fixtures every directory may use, loaded once (tests/fixtures/__init__.py says why).
pytest_plugins = ["tests.fixtures.docker_engine", "tests.fixtures.databases", "tests.fixtures.ledger"]

# The two environments the founding case was measured on (../shared/cases/tvm-17357).
OLD_ENV, NEW_ENV = "tvm-0.25.0-cpu", "tvm-0.27.0.post1-cpu"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REPO = Path(__file__).resolve().parents[1]


# pytest-xdist (`make test` runs it with --dist loadgroup): a test file is the unit handed to a
# worker process, so a file's module-scoped stacks start once. The Docker tests and the hostile
# suite are one unit: they share the session's private engine (tests/fixtures/docker_engine.py).
# The units that take longest go first, so that no worker starts one of them last.
ONE_UNIT = {"tests/docker/": "docker-engine", "tests/hostile/": "docker-engine"}
LONGEST_FIRST = ("docker-engine", "hostile-local", "tests/test_first_hour.py",
                 "tests/service/test_bisect_over_http.py", "tests/service/test_recovery.py",
                 "tests/service/test_reduce_over_http.py")


def unit_of(item: pytest.Item) -> str:
    """The xdist group of a test: its file, or the unit its directory belongs to. The hostile
    suite's local half needs no engine: it is a unit of its own (its own private Redis)."""
    path = item.nodeid.split("::")[0]
    if path.startswith("tests/hostile/") and "[local" in item.nodeid:
        return "hostile-local"
    return next((unit for prefix, unit in ONE_UNIT.items() if path.startswith(prefix)), path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group the tests by unit and put the longest units first (a stable sort keeps the rest)."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(unit_of(item)))
    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(unit_of(item), len(rank)))


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


@pytest.fixture(scope="session")
def warm_runtime(settings: Settings, tvm_envs: dict[str, Environment]) -> Iterator[Any]:
    """One local runtime for the session's runs, as a worker's pool process has it: a sandbox of
    each founding environment waits warm, forked by the environment's zygote (TVM imported
    once), so a run pays no TVM import. Tests of the cold path make a runtime of their own."""
    from worker.runtimes.local import LocalRuntime

    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    runtime.prewarm(list(tvm_envs.values()))
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def founding_local_runs(test_home: Path, tvm_envs: dict[str, Environment]) -> list[dict[str, Any]]:
    """`tvmrepro run` of the founding case `--local` on both environments, once per session
    (the CLI, the harness, the report and the symbol trace tests all read it)."""
    from tests.cli.test_cli_local import run_json

    return run_json(shared_case("tvm-17357/case.json"), test_home)


@pytest.fixture
def home_env(test_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point TVMREPRO_HOME at the test home for code that reads the process environment."""
    monkeypatch.setenv("TVMREPRO_HOME", str(test_home))
    yield test_home
