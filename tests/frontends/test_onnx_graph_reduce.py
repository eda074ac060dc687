"""The frontend corpus's importer failures, reduced as ONNX graphs (worker/narrowing/onnx_reduce.py).

Every cell of tests/cases/frontend where plain TVM fails in `from_onnx` on a default release
(expected.json: stage `import (frontend)`) is reduced in that release's frontend flavour: the
nodes by ddmin, each round of candidates imported in one sandbox, then the input shapes; the
graph left is written as an `onnx.helper` script, which is run as any report is and must fail
as plain TVM did (status, stage, error type, message) with the report's signature.

onnx-topk-int64-indices (4 nodes: two Constants, TopK, Div) keeps TopK and Div, the Constants'
values carried as initializers (the importer still sees constants: the message names
`metadata["relax.expr.Constant"][0]`). onnx-gather-shape-indices has two nodes, Shape and
Gather, and neither alone fails (a graph input is a tensor, never the ShapeExpr Gather
trips on): ddmin's verdict is the graph itself, its shapes made all ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tvmrepro.cases import load_case_file
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings
from worker.environments.provision import provision
from worker.narrowing.onnx_reduce import reduce_graph
from worker.runtimes.local import LocalRuntime

CORPUS = Path(__file__).resolve().parents[1] / "cases" / "frontend"
IMPORT_STAGE = "import (frontend)"
# Reports whose every single node, alone, imports: two nodes are their smallest graph.
IRREDUCIBLE_PAIRS = {"onnx-gather-shape-indices"}


def importer_failures() -> list[tuple[str, str]]:
    """(report, environment) for each default release where plain TVM fails in from_onnx."""
    envs = default_catalog().spanning("cpu")
    cells = []
    for report in sorted(p for p in CORPUS.iterdir() if (p / "report.py").is_file()):
        expected = json.loads((report / "expected.json").read_text())
        for env in envs:
            cell = expected.get(f"tvm-{env.release}") or {}
            if cell.get("stage_hint") == IMPORT_STAGE and "from_onnx" in \
                    (report / "report.py").read_text():
                cells.append((report.name, env.id))
    return cells


CELLS = importer_failures()


def test_the_corpus_has_importer_failures() -> None:
    assert {name for name, _ in CELLS} == {"onnx-gather-shape-indices",
                                           "onnx-topk-int64-indices"}


@pytest.fixture(scope="module")
def runtime(settings: Settings) -> Iterator[LocalRuntime]:
    """Warm sandboxes of the frontend flavours the cells run in."""
    envs = [default_catalog().get(env_id) for env_id in sorted({e for _, e in CELLS})]
    for env in envs:
        provision(settings, env.with_frontends())
    found = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    found.prewarm([env.with_frontends() for env in envs])
    yield found
    found.close()


@pytest.mark.parametrize(("name", "env_id"), CELLS)
def test_importer_failure_reduces_to_a_smaller_graph(name: str, env_id: str,
                                                     runtime: LocalRuntime) -> None:
    env: Environment = default_catalog().get(env_id)
    plain = json.loads((CORPUS / name / "expected.json").read_text())[f"tvm-{env.release}"]
    found = reduce_graph(load_case_file(CORPUS / name / "report.py"), env, runtime)
    assert (found.reference.status, found.reference.stage) == ("error", "frontend")
    before, after = found.before["nodes"], found.after["nodes"]
    if name in IRREDUCIBLE_PAIRS:
        assert before == after == 2
        assert found.candidates >= 2  # each node alone was imported, and did not fail so
    else:
        assert after <= before // 2, found.log
    assert all(all(d == 1 for d in dims) for dims in found.after["shapes"].values())
    # The written script: onnx.helper calls and from_onnx, failing as plain TVM does.
    assert "helper.make_node(" in found.script and "from_onnx(model)" in found.script
    assert found.script.count("helper.make_node(") == after
    rerun = found.rerun
    assert found.reproduces, found.answer()["rerun"]
    assert rerun.signature == found.reference.signature
    assert (rerun.status, rerun.stage, rerun.error_type) == ("error", "frontend",
                                                             plain["error_type"])
    assert plain["error_first_line"].startswith(f"{rerun.error_type}: {rerun.message}")
