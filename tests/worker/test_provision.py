"""Provisioning: idempotent, safe when two run at once, fingerprinted (real uv, real TVM wheels)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.util import cache_from_source
from pathlib import Path

import pytest

from tests.conftest import NEW_ENV
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.environments.provision import env_dir, provision, read_fingerprint

pytestmark = pytest.mark.tvm


def fresh_home(tmp_path: Path, settings: Settings) -> Path:
    """An empty TVMREPRO_HOME that shares the test session's package cache (no new downloads)."""
    home = tmp_path / "home"
    home.mkdir()
    settings.cache_dir.mkdir(parents=True, exist_ok=True)
    (home / "uv-cache").symlink_to(settings.cache_dir)
    return home


def test_fingerprint_records_pins_libinfo_and_passes(tvm_envs: dict[str, Environment],
                                                     settings: Settings) -> None:
    env = tvm_envs[NEW_ENV]
    fingerprint = read_fingerprint(settings, env)
    assert fingerprint is not None
    assert fingerprint["packages"] == env.packages
    assert fingerprint["version"] == env.release
    assert fingerprint["libinfo"]["USE_LLVM"] == "ON"
    assert {"FuseTIR", "LambdaLift", "AllocateWorkspace"} <= set(fingerprint["passes"])


def test_second_provision_changes_nothing(tvm_envs: dict[str, Environment], settings: Settings) -> None:
    env = tvm_envs[NEW_ENV]
    marker = env_dir(settings, env) / "fingerprint.json"
    before = marker.stat().st_mtime_ns
    assert provision(settings, env)["id"] == env.id
    assert marker.stat().st_mtime_ns == before


def test_two_provisions_at_once_make_one_working_environment(tvm_envs: dict, settings: Settings,
                                                             tmp_path: Path) -> None:
    home = fresh_home(tmp_path, settings)
    cli = str(Path(sys.executable).parent / "tvmrepro")
    env = {"PATH": "/usr/bin:/bin", "TVMREPRO_HOME": str(home)}
    procs = [subprocess.Popen([cli, "env", "provision", NEW_ENV], env=env, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outcomes = [(p.wait(timeout=600), p.stderr.read() if p.stderr else "") for p in procs]
    assert [rc for rc, _ in outcomes] == [0, 0], outcomes
    envs_dir = home / "envs"
    assert sorted(p.name for p in envs_dir.iterdir() if not p.name.startswith(".")) == [NEW_ENV]
    builds = [p for p in envs_dir.iterdir() if p.name.startswith(f".{NEW_ENV}.") and p.is_dir()
              and not p.is_symlink()]
    assert len(builds) == 1  # the loser of the race built nothing
    assert (envs_dir / NEW_ENV).resolve() == builds[0].resolve()
    listing = subprocess.run([cli, "env", "list", "--json"], env=env, capture_output=True, text=True)
    rows = {r["id"]: r for r in json.loads(listing.stdout)["environments"]}
    assert rows[NEW_ENV]["provisioned"] is True
    assert rows[next(i for i in rows if i != NEW_ENV)]["provisioned"] is False


def test_changed_pins_make_the_environment_stale(tvm_envs: dict[str, Environment],
                                                 settings: Settings) -> None:
    env = tvm_envs[NEW_ENV]
    repinned = Environment(**{**env.__dict__, "packages": {**env.packages, "numpy": "0.0.1"}})
    assert read_fingerprint(settings, repinned) is None


def test_a_changed_pin_republishes_without_a_gap(tvm_envs: dict, settings: Settings,
                                                tmp_path: Path) -> None:
    home = fresh_home(tmp_path, settings)
    fresh = Settings.from_env({"TVMREPRO_HOME": str(home)})
    env = tvm_envs[NEW_ENV]
    provision(fresh, env)
    first = (home / "envs" / NEW_ENV).resolve()
    # Compiled when made: a sandbox cannot write bytecode, and would compile TVM in every run.
    package = next(first.glob("lib/python*/site-packages/tvm"))
    assert [source for source in package.rglob("*.py")
            if not Path(cache_from_source(str(source))).exists()] == []
    repinned = Environment(**{**env.__dict__, "packages": {**env.packages, "pytest": "9.1.0"}})
    assert provision(fresh, repinned)["packages"]["pytest"] == "9.1.0"
    second = (home / "envs" / NEW_ENV).resolve()
    assert second != first and not first.exists()  # the old build is gone, the link moved
    assert read_fingerprint(fresh, repinned) is not None and read_fingerprint(fresh, env) is None


# Waits for the test to say "go" (a file the test writes into the build the run uses, which the
# sandbox sees read-only as its sys.prefix), then reads files of its environment that nothing read
# before: they must still be there.
IN_FLIGHT = """
import os, pathlib, sys, time, tvm
go, deadline = pathlib.Path(sys.prefix, "go"), time.monotonic() + 120
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
print("go" if go.exists() else "no go")
package = os.path.dirname(tvm.__file__)
print(len(os.listdir(package)) > 0, len(open(os.path.join(package, "__init__.py")).read()) > 0)
import pytest
print("imported", pytest.__name__)
"""


def held(build: Path) -> bool:
    """Whether someone holds `build` (a sandbox started from it holds a shared lock)."""
    import fcntl
    import os

    fd = os.open(build, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases what it took
    return False


def test_reprovisioning_keeps_the_build_a_run_is_using(tvm_envs: dict, settings: Settings,
                                                       tmp_path: Path) -> None:
    import threading
    import time

    from tvmrepro.cases import parse_case
    from worker.runner import run_variant
    from worker.runtimes.local import LocalRuntime

    home = fresh_home(tmp_path, settings)
    fresh = Settings.from_env({"TVMREPRO_HOME": str(home)})
    env = tvm_envs[NEW_ENV]
    provision(fresh, env)
    first = (home / "envs" / NEW_ENV).resolve()
    # Compiled when made: a sandbox cannot write bytecode, and would compile TVM in every run.
    package = next(first.glob("lib/python*/site-packages/tvm"))
    assert [source for source in package.rglob("*.py")
            if not Path(cache_from_source(str(source))).exists()] == []
    results = []
    runner = threading.Thread(daemon=True, target=lambda: results.append(run_variant(
        parse_case({"script": IN_FLIGHT, "timeout_s": 300}), "script", env, LocalRuntime(fresh),
        run_id="in-flight")))
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while not held(first):  # the run's sandbox started from the first build
            assert runner.is_alive() and time.monotonic() < deadline, results
            time.sleep(0.05)
        repinned = Environment(**{**env.__dict__, "packages": {**env.packages, "pytest": "9.1.0"}})
        provision(fresh, repinned)  # while the run is in flight
        moved, kept = (home / "envs" / NEW_ENV).resolve() != first, (first / "bin").is_dir()
    finally:
        if first.is_dir():
            (first / "go").write_text("1")  # the run goes on, whatever happened here
    runner.join(timeout=300)
    (result,) = results
    assert result.status == "ok", (result.message, result.log.stderr[-2000:])
    assert result.log.stdout.splitlines() == ["go", "True True", "imported pytest"]
    assert moved and kept  # the link moved on; the run's build stayed while it ran
    assert not first.exists()  # and was collected once the run ended


def test_collection_keeps_the_current_build_and_held_ones(tmp_path: Path) -> None:
    import fcntl
    import os

    from tvmrepro.environments import default_catalog
    from worker.environments.provision import collect_builds

    # The envs folder reached through a link, as every test stack's home has it.
    shared = tmp_path / "shared-envs"
    shared.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / "envs").symlink_to(shared)
    env = default_catalog().get(NEW_ENV)
    current, old, held = (shared / f".{env.id}.{name}" for name in ("current", "old", "held"))
    for build in (current, old, held):
        build.mkdir()
    (shared / env.id).symlink_to(current.name)
    fresh = Settings.from_env({"TVMREPRO_HOME": str(home)})
    holder = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_SH)  # as a running sandbox holds its build
        assert [p.name for p in collect_builds(fresh, env)] == [old.name]
        assert current.exists() and held.exists() and not old.exists()
    finally:
        os.close(holder)
    assert [p.name for p in collect_builds(fresh, env)] == [held.name]
    assert current.exists() and (home / "envs" / env.id).resolve() == current
