"""Relay-era ONNX reports carried over onto Relax (images/harness/relay_carry.py).

Each report under tests/cases/<case>/report.py imports `tvm.relay` for its ONNX frontend, build
and graph executor; ported.py is the same report ported to Relax by hand. Run through the local
runtime on the newest default release (in the frontend flavour their imports select), the
carried-over report answers as its hand port does, and says that it was carried over. A report
that reaches for any other Relay API stays `incompatible`, naming it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from images import IMAGES_DIR
from tvmrepro.cases import load_case_file, parse_case
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

sys.path.insert(0, str(IMAGES_DIR))
from harness.relay_carry import NOTE, wanted  # noqa: E402

CASES_DIR = Path(__file__).resolve().parents[1] / "cases"
CASES = ("tvm-19500", "tvm-19501")


@pytest.fixture(scope="module")
def newest(default_envs: list[Environment]) -> Environment:
    return default_envs[-1]


@pytest.fixture(scope="module")
def runtime(settings: Settings, newest: Environment) -> Iterator[LocalRuntime]:
    """A warm sandbox of the newest release only: one release answers the comparison."""
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    runtime.prewarm([newest])
    yield runtime
    runtime.close()


def _run(path: Path, env: Environment, runtime: LocalRuntime) -> Result:
    return run_variant(load_case_file(path), "script", env, runtime)


def test_only_relay_onnx_scripts_are_carried_over() -> None:
    report = (CASES_DIR / "tvm-19500" / "report.py").read_text()
    assert wanted(report)
    assert not wanted((CASES_DIR / "tvm-19500" / "ported.py").read_text())  # no Relay
    assert not wanted((CASES_DIR / "tvm-10398" / "report.py").read_text())  # no ONNX
    assert not wanted("import tvm.relay\n# from_onnx(\nx = (\n")  # not Python
    # Relay only tried, Relax's importer used: the script's own fallback stays its own.
    assert not wanted("try:\n    from tvm import relay\nexcept ImportError:\n    relay = None\n"
                      "from tvm.relax.frontend.onnx import from_onnx\n")
    assert wanted("import tvm.relay\nfrom tvm.relay.frontend.onnx import from_onnx\n")


@pytest.mark.parametrize("name", CASES)
def test_carried_over_report_answers_as_its_relax_port(name: str, newest: Environment,
                                                       runtime: LocalRuntime) -> None:
    carried = _run(CASES_DIR / name / "report.py", newest, runtime)
    ported = _run(CASES_DIR / name / "ported.py", newest, runtime)
    cell = (f"{name} on {newest.id}: carried {carried.status} {carried.stage} "
            f"{carried.error_type} {carried.message}; ported {ported.status} {ported.stage} "
            f"{ported.error_type} {ported.message}")
    assert NOTE in carried.rewrites and NOTE not in ported.rewrites, cell
    assert (carried.status, carried.stage, carried.error_type) == \
        (ported.status, ported.stage, ported.error_type), cell
    expected = json.loads((CASES_DIR / name / "EXPECTED.json").read_text())
    tool = expected["tvm-repro"][f"tvm-{newest.release}"]
    assert [carried.status, carried.stage, carried.error_type] == tool, cell


def test_a_relay_pass_is_not_carried_over(newest: Environment, runtime: LocalRuntime) -> None:
    """tvm-19500's report with a Relay pass on its imported module: no Relax counterpart."""
    report = (CASES_DIR / "tvm-19500" / "report.py").read_text()
    anchor = 'mod, params = relay.frontend.from_onnx(model, shape={"X": x.shape})\n'
    assert anchor in report
    script = report.replace(anchor, anchor + "mod = relay.transform.InferType()(mod)\n")
    result = run_variant(parse_case({"script": script}), "script", newest, runtime)
    assert (result.status, result.error_type) == ("incompatible", "NotCarried"), result.message
    assert (result.message or "").startswith(
        "tvm.relay.transform.InferType has no Relax counterpart here"), result.message
    assert NOTE in result.rewrites
