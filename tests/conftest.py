"""Shared fixtures: a TVMREPRO_HOME for the test session and provisioned TVM environments.

Environments are real (apache-tvm from PyPI, made by `worker.environments.provision`) and
kept between test sessions in TVMREPRO_TEST_HOME (default
~/.cache/tvmrepro-test): provisioning is idempotent, so a second session
reuses them and only the first one pays for the download.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings

if TYPE_CHECKING:
    from worker.runtimes.local import LocalRuntime

# Session fixtures every directory may use, loaded once (tests/fixtures/__init__.py says why).
pytest_plugins = ["tests.fixtures.docker_engine", "tests.fixtures.databases", "tests.fixtures.ledger",
                  "tests.fixtures.timing"]

# The two environments the founding case was measured on (tests/cases/tvm-17357).
OLD_ENV, NEW_ENV = "tvm-0.25.0-cpu", "tvm-0.27.0.post1-cpu"
# The function its fusetir-once variant cannot find at VM creation (renamed by AllocateWorkspace).
MISSING_FUNCTION = "fused_relax_nn_attention_cutlass_gv"
REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "cases"  # every case the tests run, kept with them
# apache/tvm's commit index (tvmrepro/data/README.md): the test stacks' history.
HISTORY_INDEX = REPO / "tvmrepro" / "data" / "apache-tvm-commits.jsonl.gz"


# pytest-xdist (`make test` runs it with -n): a unit of tests is handed to one worker process
# whole, so a file's module-scoped stacks start once. The unit is the test's file, but for
# four units that each use the private Docker engine of their worker process
# (tests/fixtures/docker_engine.py), so that they run side by side: the Docker tests, which
# share the images built on it; the frontend image's tests, whose build takes minutes; the
# compose test, which removes them to see its worker build them; the hostile suite's Docker
# half, which builds the one image it needs. The hostile
# suite's local half is a unit too (its private Redis). The units that take longest go first,
# so that no worker starts one of them last. (xdist's own `loadgroup` marks do not group under
# pytest 9.2, whose node ids no longer follow `_nodeid`: hence a scheduler of our own.)
ONE_UNIT = {"tests/docker/test_compose.py": "docker-compose",
            "tests/docker/test_frontend_images.py": "docker-frontends",
            "tests/docker/": "docker-engine", "tests/hostile/": "hostile-docker"}
LONGEST_FIRST = ("docker-engine", "docker-compose", "hostile-docker", "docker-frontends",
                 "tests/service/test_recovery.py", "hostile-local",
                 "tests/service/test_reduce_over_http.py", "tests/cli/test_extract_reduce.py",
                 "tests/service/test_founding_over_http.py", "tests/service/test_bisect_over_http.py",
                 "tests/test_first_hour.py")


def unit_of(nodeid: str) -> str:
    """The unit of a test: its file, or the unit its directory belongs to. The hostile suite's
    local half needs no engine: it is a unit of its own."""
    path = nodeid.split("::")[0]
    if path.startswith("tests/hostile/") and "[local" in nodeid:
        return "hostile-local"
    return next((unit for prefix, unit in ONE_UNIT.items() if path.startswith(prefix)), path)


# The unit of the test being set up: a session fixture made for it knows whose it is (the
# private Docker engine keeps a data root per unit).
CURRENT_UNIT = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.config.stash[CURRENT_UNIT] = unit_of(item.nodeid)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest units first (a stable sort keeps the order of the rest)."""
    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(unit_of(item.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling, its scopes our units, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # keep LONGEST_FIRST, not the largest units first
    return UnitScheduling(config, log)


def case_path(name: str) -> Path:
    """A file of a case kept in tests/cases (e.g. 'tvm-17357/case.json')."""
    path = CASES / name
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the tests' cases are in tests/cases")
    return path


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
    from worker.environments.provision import provision

    catalog = default_catalog()
    envs = {env_id: catalog.get(env_id) for env_id in (OLD_ENV, NEW_ENV)}
    for env in envs.values():
        provision(settings, env)
    return envs


@pytest.fixture(scope="session")
def warm_runtime(settings: Settings, tvm_envs: dict[str, Environment]) -> Iterator[LocalRuntime]:
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
    from tests.cli.command_line import run_json

    return run_json(case_path("tvm-17357/case.json"), test_home)


@pytest.fixture
def home_env(test_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point TVMREPRO_HOME at the test home for code that reads the process environment."""
    monkeypatch.setenv("TVMREPRO_HOME", str(test_home))
    yield test_home
