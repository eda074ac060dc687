"""A broken release wheel is the environment's defect, never the report's: its canary (a tiny
Relax module parsed, built, loaded and run, for LLVM and for C source) says what the wheel
cannot do, plain TVM deciding. apache-tvm 0.25.0rc0 cannot load a module with C source in
the VM (`Cannot find the source directory given ffi_dir`, from export_library), whatever
the module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.command_line import bisect_json
from tests.conftest import case_path
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.jobs.oracles import Verdict, judge, parse_oracle
from tvmrepro.settings import Settings
from worker.environments.health import broken, defect
from worker.environments.provision import provision

BROKEN_WHEEL, NEXT = "tvm-0.25.0rc0-cpu", "tvm-0.25.0rc1-cpu"


@pytest.fixture(scope="module")
def wheels(settings: Settings) -> dict[str, Environment]:
    """The broken wheel and the next release, provisioned."""
    envs = {env_id: default_catalog().get(env_id) for env_id in (BROKEN_WHEEL, NEXT)}
    for env in envs.values():
        provision(settings, env)
    return envs


def test_the_canary_finds_what_the_wheel_cannot_do(settings: Settings,
                                                   wheels: dict[str, Environment]) -> None:
    failing = broken(provision(settings, wheels[BROKEN_WHEEL])["health"])
    assert [stage for stage, _ in failing] == ["vm_init"]
    assert "Cannot find the source directory given ffi_dir" in failing[0][1]
    assert broken(provision(settings, wheels[NEXT])["health"]) == []


def test_only_the_canarys_own_failure_is_the_environments() -> None:
    health = {"vm_init (target c)": "AssertionError: Cannot find the source directory given "
                                    "ffi_dir: /home/u/envs/x/lib/python3.11/site-packages/tvm"}
    said = "Cannot find the source directory given ffi_dir: /mnt/env/lib/python3.11/site-packages/tvm"
    assert defect(health, "error", "vm_init", "AssertionError", said) is not None
    assert defect(health, "error", "build", "AssertionError", said) is None
    assert defect(health, "error", "vm_init", "InternalError", "Check failed: x") is None
    assert defect(health, "crash", "vm_init", "SIGSEGV", said) is None
    assert defect(None, "error", "vm_init", "AssertionError", said) is None
    run = {"status": "error", "environment_defect": "the wheel fails its canary"}
    assert judge(parse_oracle("failure"), run, None) == Verdict.SKIP


def test_bisecting_past_a_broken_wheel_is_unchanged(test_home: Path,
                                                     wheels: dict[str, Environment]) -> None:
    found = bisect_json(case_path("health/c-target-module.json"), "--env", BROKEN_WHEEL,
                        "--env", NEXT, "--env", "tvm-0.27.0.post1-cpu", home=test_home)
    assert found["verdict"] == "unchanged", found
    probes = {p["environment"]: p for p in found["probes"]}
    assert probes[BROKEN_WHEEL]["verdict"] == "skip"
    assert "canary" in probes[BROKEN_WHEEL]["environment_defect"]
    assert {probes[e]["verdict"] for e in (NEXT, "tvm-0.27.0.post1-cpu")} == {"good"}
