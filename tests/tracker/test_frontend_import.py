"""Reports that build their model with PyTorch or ONNX are imported as runnable (every release
pins a verified frontend set), and triage runs them; a package no environment pins still makes
a report `no_code`, naming it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from cli.commands.tracker import run_reports
from tests.conftest import NEW_ENV, case_path
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.frontends import needs_frontends
from tvmrepro.jobs.tracker.importing import ImportedReport, environment_modules, export_entry
from tvmrepro.jobs.tracker.triage import Verdict, triage
from tvmrepro.settings import Settings

if TYPE_CHECKING:
    from worker.runtimes.local import LocalRuntime


def issue(number: int, script: str, actual: str) -> ImportedReport:
    """An issue as `gh issue list --json` gives it, its body a bug report around `script`."""
    body = (f"### Steps to reproduce\n\n```python\n{script}```\n\n### Actual behavior\n\n"
            f"```\n{actual}\n```\n\n### Environment\n\nTVM 0.27.0.post1, Ubuntu 24.04\n")
    return export_entry({"number": number, "title": f"[Bug] report {number}", "state": "OPEN",
                         "body": body, "url": f"https://github.com/apache/tvm/issues/{number}"}, 0)


def frontend_issue(number: int, case: str, actual: str) -> ImportedReport:
    return issue(number, case_path(f"frontend/{case}/report.py").read_text(), actual)


def test_the_frontend_packages_are_among_what_the_environments_import() -> None:
    assert {"torch", "onnx", "onnxruntime", "onnxscript"} <= environment_modules()
    assert set(default_catalog().get(NEW_ENV).frontend_modules) <= environment_modules()


def test_a_torch_report_is_runnable_and_runs_in_the_frontend_flavour() -> None:
    # apache/tvm#18339: torch.export of torch.mm, then from_exported_program.
    report = frontend_issue(18339, "export-mm-default",
                            "AssertionError: Unsupported function types ['mm.default']")
    assert report.no_code is None and report.script is not None
    assert "import torch" in report.script and "from_exported_program" in report.script
    assert report.quoted_error == "AssertionError: Unsupported function types ['mm.default']"
    assert needs_frontends(report.case())


def test_an_onnx_report_is_runnable() -> None:
    # apache/tvm#19531: an onnx.helper graph compared with onnxruntime.
    report = frontend_issue(19531, "onnx-gather-negative-indices", "AssertionError: Not equal")
    assert report.no_code is None and report.script is not None
    assert "import onnxruntime as ort" in report.script
    assert needs_frontends(report.case())


@pytest.mark.parametrize("imports, needs", [
    ("import tensorflow as tf\n", "package tensorflow"),
    # torch is pinned, torchvision is not: only the missing one is named.
    ("import torch\nimport torchvision\n", "package torchvision"),
])
def test_a_package_no_environment_pins_is_still_named(imports: str, needs: str) -> None:
    report = issue(1, f"{imports}import tvm\nprint(tvm.__version__)\n", "ValueError: bad")
    assert report.script is None
    assert report.no_code == f"the script needs what the body does not hold: {needs}"


@pytest.fixture(scope="module")
def runtime(settings: Settings) -> Iterator[tuple[Environment, LocalRuntime]]:
    """The newest founding environment, provisioned, and a local runtime of cold sandboxes (the
    frontend flavour is made on the first report that needs it)."""
    from worker.environments.provision import provision
    from worker.runtimes.local import LocalRuntime

    env = default_catalog().get(NEW_ENV)
    provision(settings, env)
    local = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    yield env, local
    local.close()


@pytest.mark.tvm
def test_triage_runs_an_onnx_report(runtime: tuple[Environment, LocalRuntime]) -> None:
    """apache/tvm#20297 (ScatterND far outside its data): plain TVM 0.27.0.post1 segfaults in
    the VM (tests/cases/frontend/onnx-scatter-out-of-range-index), and so does its triage."""
    env, local = runtime
    report = frontend_issue(20297, "onnx-scatter-out-of-range-index",
                            "!!!!!!! Segfault encountered !!!!!!!\nSegmentation fault (core dumped)")
    assert report.quoted_error_type == "crash"
    runs = run_reports([report], [env], local, width=1)
    line = triage([report], runs).reports[0]
    assert line.statuses == {NEW_ENV: "crash"}, runs
    assert (line.verdict, line.quoted_error_reproduced, line.no_code) == \
        (Verdict.REPRODUCES, True, None)
