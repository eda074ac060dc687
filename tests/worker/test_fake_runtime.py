"""The FakeRuntime: its scripted outcomes come back through the real runner as results; its
fingerprints are real environments' (recorded); the product's worker refuses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.fakes.runtime import DIRECTIVE, FINGERPRINTS, RECORDED, FakeRuntime
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput, RuntimeFault
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes import make_runtime

ENV = default_catalog().get("tvm-0.27.0.post1-cpu")


def scripted(*outcomes: dict[str, Any]) -> dict[str, Any]:
    """A two-variant case whose directive lines script `outcomes`."""
    lines = "".join(f"{DIRECTIVE} {json.dumps(o)}\n" for o in outcomes)
    return {"source": f"{lines}x = 1\n", "variants": [
        {"name": "one", "passes": ["FuseTIR", "LambdaLift", "AllocateWorkspace"]},
        {"name": "two", "passes": ["FuseTIR"]}], "timeout_s": 2}


def run(tmp_path: Path, data: dict[str, Any], variant: str = "one") -> Result:
    """Run a variant with the fake runtime."""
    runtime = FakeRuntime(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)}))
    return run_variant(parse_case(data), variant, ENV, runtime)


def test_without_a_directive_every_pass_runs_and_the_run_is_ok(tmp_path: Path) -> None:
    result = run(tmp_path, scripted())
    assert result.status == "ok" and result.tvm is not None
    assert (result.tvm["version"], result.tvm["packages"]) == (ENV.release, ENV.packages)
    assert [p.name for p in result.passes] == ["FuseTIR", "LambdaLift", "AllocateWorkspace"]
    assert result.isolation["runtime"] == "fake"


def test_a_directive_applies_to_its_variant_only(tmp_path: Path) -> None:
    data = scripted({"variant": "one", "status": "error", "stage": "pass:1:LambdaLift",
                     "error_type": "InternalError", "message": "boom"})
    failed = run(tmp_path, data)
    assert (failed.status, failed.stage, failed.signature) == (
        "error", "pass:1:LambdaLift", "InternalError: boom")
    assert [p.name for p in failed.passes] == ["FuseTIR"]  # the passes before the failing one
    assert run(tmp_path, data, "two").status == "ok"


@pytest.mark.parametrize(("outcome", "status", "error_type"), [
    ({"sleep": 3}, "timeout", "Timeout"),  # past the case's time limit of 2 s
    ({"signal": "SIGSEGV"}, "crash", "SIGSEGV"),
    ({"exit": 3}, "error", "Exit"),
])
def test_runs_that_end_without_a_result_are_classified(tmp_path: Path, outcome: dict[str, Any],
                                                       status: str, error_type: str) -> None:
    result = run(tmp_path, scripted(outcome))
    assert (result.status, result.error_type) == (status, error_type)


def test_a_scripted_fault_is_a_runtime_fault(tmp_path: Path) -> None:
    with pytest.raises(RuntimeFault, match="engine away"):
        run(tmp_path, scripted({"fault": "engine away"}))


def test_its_fingerprint_is_the_recorded_one_and_only_recorded_environments_have_one(
        tmp_path: Path) -> None:
    fake = FakeRuntime(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)}))
    recorded = json.loads(FINGERPRINTS.read_text())
    assert sorted(recorded) == sorted(RECORDED)
    assert fake.fingerprint(ENV) == recorded[ENV.id]
    assert fake.fingerprint(ENV)["packages"] == ENV.packages  # recorded for today's pins
    with pytest.raises(RuntimeFault, match="no recorded fingerprint of tvm-0.26.0-cpu"):
        fake.fingerprint(default_catalog().get("tvm-0.26.0-cpu"))


@pytest.mark.tvm
def test_the_recorded_fingerprints_are_the_real_environments(
        tvm_envs: dict[str, Environment], settings: Settings) -> None:
    from worker.environments.provision import provision

    recorded = json.loads(FINGERPRINTS.read_text())
    for env_id in RECORDED:
        real = provision(settings, tvm_envs[env_id])  # what LocalRuntime.fingerprint returns
        # What tells one TVM from another; the interpreter's patch level is the machine's.
        for key in ("passes", "version", "packages", "libinfo", "commit"):
            assert recorded[env_id][key] == real[key], f"{env_id} {key}: record it again " \
                f"(python -m tests.fakes.runtime)"


def test_the_product_knows_no_fake_runtime(tmp_path: Path) -> None:
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_RUNTIME": "fake"})
    with pytest.raises(BadInput, match=r"^TVMREPRO_RUNTIME: unknown runtime 'fake'; "
                                       r"known: local, docker$"):
        make_runtime(settings.runtime, settings)


def test_a_worker_given_the_fake_runtime_refuses_to_start(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_URL", "DATABASE_URL") and not k.startswith("TVMREPRO_")}
    environ.update(TVMREPRO_HOME=str(tmp_path), TVMREPRO_RUNTIME="fake")
    done = subprocess.run([sys.executable, "-m", "cli", "worker", "--env", ENV.id],
                          env=environ, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr  # bad input
    assert "TVMREPRO_RUNTIME: unknown runtime 'fake'; known: local, docker" in done.stderr
    assert "Traceback" not in done.stderr
