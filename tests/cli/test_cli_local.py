"""`tvmrepro run --local` end to end on the founding case (apache/tvm#17357), real TVM."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.command_line import run_json, tvmrepro
from tests.conftest import MISSING_FUNCTION, NEW_ENV, OLD_ENV, case_path
from tvmrepro.liveness import process_token

pytestmark = pytest.mark.tvm


def cell(runs: list[dict[str, Any]], variant: str, env: str) -> dict[str, Any]:
    """The run of `variant` in `env`."""
    return next(r for r in runs if r["variant"] == variant and r["environment"] == env)


@pytest.fixture
def module_runs(founding_local_runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return founding_local_runs


def test_fusetir_once_fails_at_vm_init_with_one_signature(module_runs: list[dict]) -> None:
    old, new = (cell(module_runs, "fusetir-once", env) for env in (OLD_ENV, NEW_ENV))
    for run in (old, new):
        assert run["status"] == "error"
        assert run["stage"] == "vm_init"
        assert run["error_type"] == "InternalError"
        assert MISSING_FUNCTION in run["signature"]
    assert old["signature"] == new["signature"]
    assert old["tvm"]["version"] == "0.25.0" and new["tvm"]["version"] == "0.27.0.post1"


def test_fusetir_twice_is_ok(module_runs: list[dict]) -> None:
    for env in (OLD_ENV, NEW_ENV):
        assert cell(module_runs, "fusetir-twice", env)["status"] == "ok"


def test_pass_trace_shows_the_function_appear_then_renamed(module_runs: list[dict]) -> None:
    for env in (OLD_ENV, NEW_ENV):
        passes = cell(module_runs, "fusetir-once", env)["passes"]
        assert [p["name"] for p in passes] == ["FuseTIR", "LambdaLift", "AllocateWorkspace"]
        names = [{f["name"]: f for f in p["functions"]} for p in passes]
        assert MISSING_FUNCTION not in names[0]
        lifted = names[1][MISSING_FUNCTION]
        assert lifted["kind"] == "Function"
        assert lifted["attrs"]["Composite"] == "cutlass.attention"
        assert MISSING_FUNCTION not in names[2] and MISSING_FUNCTION + "1" in names[2]
        assert "def fused_relax_nn_attention_cutlass_gv1" in passes[2]["ir"]


def test_second_fusetir_turns_the_function_into_a_primfunc(module_runs: list[dict]) -> None:
    passes = cell(module_runs, "fusetir-twice", OLD_ENV)["passes"]
    after_second_fusetir = {f["name"]: f["kind"] for f in passes[2]["functions"]}
    assert after_second_fusetir[MISSING_FUNCTION] == "PrimFunc"


def test_report_script_unchanged_gives_the_same_bug(module_runs: list[dict],
                                                    test_home: Path) -> None:
    runs = run_json(case_path("tvm-17357/original.py"), test_home)
    for env in (OLD_ENV, NEW_ENV):
        run = cell(runs, "script", env)
        assert run["status"] == "error", run["log"]["stderr"][-2000:]
        assert run["stage"] == "vm_init"
        assert run["signature"] == cell(module_runs, "fusetir-once", env)["signature"]
        assert {"tir-to-tirx", "block-to-sblock", "prim-func-s_tir"} <= set(run["rewrites"])
        assert [p["name"] for p in run["passes"]] == ["FuseTIR", "LambdaLift", "AllocateWorkspace"]
    assert "out_sinfo-to-out_ty" in cell(runs, "script", NEW_ENV)["rewrites"]
    assert "out_sinfo-to-out_ty" not in cell(runs, "script", OLD_ENV)["rewrites"]


def test_table_output_names_status_and_stage(tvm_envs: dict, test_home: Path) -> None:
    proc = tvmrepro("run", str(case_path("tvm-17357/case.json")), "--local", "--env", OLD_ENV,
                    "--variant", "fusetir-once", home=test_home)
    assert proc.returncode == 0, proc.stderr
    assert "fusetir-once" in proc.stdout and "vm_init" in proc.stdout and "error" in proc.stdout
    assert "fusetir-twice" not in proc.stdout


BASE_CASE = {"source": "x = 1\n", "variants": [{"name": "v", "passes": ["FuseTIR"]}]}


@pytest.mark.parametrize(
    ("content", "suffix", "needle"),
    [
        ({"variants": BASE_CASE["variants"]}, ".json", "source"),
        ({**BASE_CASE, "variants": [{"name": "v", "passes": ["FuseTIR", "NoSuchPass"]}]}, ".json",
         "variants[0].passes[1]"),
        ({**BASE_CASE, "opt_level": "high"}, ".json", "opt_level"),
        ("{not json", ".json", "not JSON"),
        ([1, 2], ".json", "JSON object"),
    ],
)
def test_bad_case_exits_2_naming_the_field(content: object, suffix: str, needle: str,
                                           tmp_path: Path, tvm_envs: dict,
                                           test_home: Path) -> None:
    path = tmp_path / f"case{suffix}"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    proc = tvmrepro("run", str(path), "--local", "--env", OLD_ENV, home=test_home)
    assert proc.returncode == 2
    assert needle in proc.stderr


def test_unknown_environment_exits_2(tmp_path: Path, test_home: Path) -> None:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(BASE_CASE))
    proc = tvmrepro("run", str(path), "--local", "--env", "tvm-0.1.0-cpu", home=test_home)
    assert proc.returncode == 2
    assert "tvm-0.1.0-cpu" in proc.stderr and "--env" in proc.stderr


def test_unknown_variant_and_missing_file_exit_2(tmp_path: Path, test_home: Path) -> None:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(BASE_CASE))
    proc = tvmrepro("run", str(path), "--local", "--variant", "nope", home=test_home)
    assert proc.returncode == 2 and "nope" in proc.stderr
    proc = tvmrepro("run", str(tmp_path / "absent.json"), "--local", home=test_home)
    assert proc.returncode == 2 and "absent.json" in proc.stderr


def test_run_local_uses_only_a_live_up_serving_its_environments_and_runtime(
        tmp_path: Path) -> None:
    from cli.discovery import announced, warm_service
    from tvmrepro.environments import default_catalog
    from tvmrepro.settings import Settings

    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_RUNTIME": "local"})
    env = default_catalog().get(NEW_ENV)
    assert warm_service(settings, "local", [NEW_ENV]) is None  # no `up`
    with announced(settings, "http://127.0.0.1:8123", [env]):
        assert warm_service(settings, "local", [NEW_ENV]) == "http://127.0.0.1:8123"
        assert warm_service(settings, "docker", [NEW_ENV]) is None  # other isolation
        assert warm_service(settings, "local", [NEW_ENV, "tvm-0.25.0-cpu"]) is None  # not all
    assert not (tmp_path / "up.json").exists()
    # An `up` that died without removing it (kill -9): its process token is stale.
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "up.json").write_text(json.dumps({
        "url": "http://127.0.0.1:8123", "process": process_token(dead.pid), "runtime": "local",
        "environments": [NEW_ENV]}))
    assert warm_service(settings, "local", [NEW_ENV]) is None
    (tmp_path / "up.json").write_text("{not json")
    assert warm_service(settings, "local", [NEW_ENV]) is None


def test_run_local_hands_an_environment_provisioned_later_to_an_up_that_follows_them(
        tmp_path: Path, test_home: Path, tvm_envs: dict[str, Any]) -> None:
    from cli.discovery import announced, warm_service
    from tvmrepro.environments import default_catalog
    from tvmrepro.settings import Settings

    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_RUNTIME": "local"})
    (tmp_path / "envs").mkdir()
    with announced(settings, "http://127.0.0.1:8123", [default_catalog().get(OLD_ENV)],
                   follow_provisioned=True):
        assert warm_service(settings, "local", [NEW_ENV]) is None  # not provisioned here
        (tmp_path / "envs" / NEW_ENV).symlink_to(test_home / "envs" / NEW_ENV)
        assert warm_service(settings, "local", [OLD_ENV, NEW_ENV]) == "http://127.0.0.1:8123"
