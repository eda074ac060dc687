"""The layer verdict (docs/layers.md) on real reports, one per layer, on the default releases:
each path a sandboxed run of the report's script on real TVM, torch and onnx.

- `import`: apache/tvm#20176 (onnx-gather-shape-indices) raises in from_onnx on 0.26.0;
  apache/tvm#20184 (onnx-softplus-float64-threshold) fails its own check unoptimised on
  0.25.0.post1;
- `pass:FuseTIR`: apache/tvm#20178 (tests/cases/tvm-20178) on 0.26.0, the only release it fails
  on: every cut before FuseTIR agrees with ONNX Runtime;
- `codegen`: apache/tvm#17890 (tests/cases/tvm-17890) on 0.25.0.post1: the unoptimised module
  fails in the VM's code generation too;
- `runtime`: apache/tvm#20297 (onnx-scatter-out-of-range-index) crashes in the VM on every
  release, unoptimised too.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from cli.cli import main
from cli.output import layer_lines
from tests.cli.command_line import tvmrepro
from tests.conftest import CASES
from tests.service.stack import api_in_thread
from tests.tvmrepro.job_views import job_of
from tvmrepro.cases import Case, load_case_file
from tvmrepro.environments import Environment
from tvmrepro.jobs.report import render_report
from tvmrepro.jobs.settling import finish_run
from tvmrepro.results import Result
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

ORT = "onnxruntime 1.31.1"
# report -> (index of its release in the default set, the layer, each path: how it ended).
VERDICTS = {
    "frontend/onnx-gather-shape-indices": (1, "import", [("default", "error", "frontend")]),
    "frontend/onnx-softplus-float64-threshold": (0, "import", [
        ("default", "error", "check"), ("unoptimised", "error", "check")]),
    "tvm-20178": (1, "pass:FuseTIR", [
        ("default", "error", "pass:FuseTIR"), ("unoptimised", "ok", None),
        ("cut:1:AnnotateTIROpPattern", "ok", None), ("cut:2:FoldConstant", "ok", None),
        ("cut:3:FuseOps", "ok", None)]),
    "tvm-17890": (0, "codegen", [("default", "error", "codegen"),
                                 ("unoptimised", "error", "codegen")]),
    "frontend/onnx-scatter-out-of-range-index": (2, "runtime", [
        ("default", "crash", "run"), ("unoptimised", "crash", "run")]),
}


def asking(name: str) -> Case:
    """The report as a script case that asks for a layer verdict."""
    return load_case_file(CASES / name / "report.py").model_copy(update={"layer": True})


@pytest.fixture(scope="module")
def placed(frontend_runtime: LocalRuntime, default_envs: list[Environment]
           ) -> dict[str, Result]:
    """Each report's run, with its verdict, on the release the verdict is pinned on."""
    return {name: run_variant(asking(name), "script", default_envs[index], frontend_runtime)
            for name, (index, _, _) in VERDICTS.items()}


@pytest.mark.parametrize("name", VERDICTS)
def test_the_layer_that_first_shows_the_failure(name: str, placed: dict[str, Result]) -> None:
    _, layer, paths = VERDICTS[name]
    result = placed[name]
    found = result.layer
    assert found is not None, result.log.stderr[-2000:]
    said = json.dumps(found.model_dump(mode="json"), indent=1)
    assert found.layer == layer, said
    evidence = [p for p in found.evidence if p.path != "reference"]
    assert [(p.path, p.status, p.failed_in) for p in evidence] == paths, said
    assert found.runs == len(paths) - 1 and (found.seconds > 0) == (found.runs > 0), said
    assert evidence[0].signature == result.signature  # the default path is the run itself


def test_a_pass_is_found_by_cutting_the_pipeline(placed: dict[str, Result]) -> None:
    found = placed["tvm-20178"].layer
    assert found is not None
    # The optimisations of relax.get_default_pipeline(llvm) the script ran, FuseTIR failing:
    # its own inner passes (FuseTIRInner and the clean-ups) are part of it, not cut points.
    assert found.passes == ["AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]
    reference = next(p for p in found.evidence if p.path == "reference")
    assert (reference.status, reference.kind) == ("ok", ORT)
    for path in found.evidence[2:]:  # each cut computes what ONNX Runtime computes
        assert path.outputs == "same", path
    assert "once FuseTIR has run" in found.reason


def test_the_importer_raising_takes_no_more_runs(placed: dict[str, Result]) -> None:
    found = placed["frontend/onnx-gather-shape-indices"].layer
    assert found is not None and (found.runs, found.reason) == (0, "TVM's importer raised")


def test_a_run_that_agrees_has_nothing_to_place(frontend_runtime: LocalRuntime,
                                                default_envs: list[Environment]) -> None:
    result = run_variant(asking("tvm-20178"), "script", default_envs[2], frontend_runtime)
    assert result.status == "ok" and result.layer is not None
    assert (result.layer.layer, result.layer.runs) == (None, 0)
    assert "nothing to place" in result.layer.reason
    assert [p.outputs for p in result.layer.evidence] == ["same", None]  # default, reference


def test_the_report_says_it_first(placed: dict[str, Result],
                                  default_envs: list[Environment]) -> None:
    job = job_of({"script": ["ok", "error", "ok"]})
    for run in job.runs:
        if run.environment == default_envs[1].id:
            run.result = placed["tvm-20178"].model_dump(mode="json", exclude={"log", "passes"})
    first = render_report(job).splitlines()[0]
    assert first.endswith(f"; the failure first shows in `pass:FuseTIR` on "
                          f"{default_envs[1].release}.**"), first


def test_run_layer_on_the_command_line(test_home: Path, default_envs: list[Environment]) -> None:
    env = default_envs[2].id
    report = CASES / "frontend/onnx-scatter-out-of-range-index/report.py"
    proc = tvmrepro("run", str(report), "--local", "--cold", "--env", env, "--layer", "--json",
                    home=test_home)
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert (run["status"], run["layer"]["layer"]) == ("crash", "runtime")
    assert [p["path"] for p in run["layer"]["evidence"]] == ["default", "unoptimised"]
    # The table's line under it (print_runs) for the same run.
    assert layer_lines([run]) == [
        f"layer of script@{env}: runtime: the imported module builds with no optimisation "
        f"and fails when the VM runs it (default fails in run, unoptimised fails in run)"]


def test_layer_is_for_scripts(test_home: Path) -> None:
    proc = tvmrepro("run", str(CASES / "tvm-17357" / "case.json"), "--local", "--layer",
                    home=test_home)
    assert proc.returncode == 2
    assert "--layer" in proc.stderr and "script" in proc.stderr


def test_the_service_answers_it(tmp_path: Path, placed: dict[str, Result],
                                default_envs: list[Environment]) -> None:
    """A real API: a case that asks is taken, and the run's verdict (the one above, stored as
    the worker stores a result) is in the job's view, its report and `tvmrepro wait`."""
    env = default_envs[1].id
    case = {"title": "layer over HTTP", "layer": True,
            "script": (CASES / "tvm-20178" / "report.py").read_text()}
    with api_in_thread(tmp_path / "service") as (url, service):
        job = httpx.post(f"{url}/api/v1/jobs", json={"case": case, "environments": [env],
                                                     "wait": True}).json()
        finish_run(service.store, job["id"], job["runs"][0]["id"], placed["tvm-20178"])
        view = httpx.get(f"{url}/api/v1/jobs/{job['id']}").json()
        report = httpx.get(f"{url}/api/v1/jobs/{job['id']}/report.md").text
        shown = CliRunner().invoke(main, ["wait", job["id"], "--server", url],
                                   catch_exceptions=False)
    layer = view["runs"][0]["result"]["layer"]
    assert (view["case"]["layer"], layer["layer"]) == (True, "pass:FuseTIR"), layer
    assert [p["path"] for p in layer["evidence"]][-1] == "cut:3:FuseOps"
    assert report.splitlines()[0].endswith(
        f"the failure first shows in `pass:FuseTIR` on {default_envs[1].release}.**"), report
    assert f"layer of script@{env}: pass:FuseTIR: the module agrees up to cut:3:FuseOps" \
        in " ".join(shown.stdout.split()), shown.stdout
