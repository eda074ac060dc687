"""A real miscompile through the service: the release that computes another result differs.

apache/tvm#20105 (tests/cases/relax-adaptive-avg-pool2d-nested-init): before 0.27.0rc0,
adaptive_avg_pool2d with overlapping windows dropped a row of every window. Every
release builds and runs it; only the outputs tell.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import REPO
from tests.service.stack import Stack, founding_body
from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings
from worker.environments.provision import provision

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(600)]
WRONG, RIGHT = "tvm-0.26.0-cpu", ("tvm-0.27.0-cpu", "tvm-0.27.0.post1-cpu")
CASE = REPO / "tests" / "cases" / "relax-adaptive-avg-pool2d-nested-init" / "case.json"
# Overlapping 2x2 windows of the 3x4 input: rows [0:2] and [1:3], columns [0:2] and [2:4].
POOLED = ("np.array([[[[x[0, 0, r:r + 2, c:c + 2].mean() for c in (0, 2)] for r in (0, 1)]]],"
          " dtype='float32')")


# What is shown does not depend on the backend (both are proven by test_founding_over_http).
@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_a_miscompile_shows_in_the_matrix_and_the_report(stack: Stack, settings: Settings) -> None:
    envs = [WRONG, *RIGHT]
    for env_id in envs:
        provision(settings, default_catalog().get(env_id))
    stack.start_api()
    for env_id in envs:
        stack.start_worker(env_id)
    case: dict[str, Any] = json.loads(CASE.read_text())
    case["reference"] = POOLED  # what the entry must compute, in NumPy
    job = stack.wait(stack.submit(founding_body(case, envs))["id"], timeout=300)
    (row,) = job["matrix"]["cells"]
    assert [c["status"] for c in row] == ["ok", "ok", "ok"], json.dumps(row)[:2000]
    assert row[0]["outputs"] == "differs"  # the others agree: bitwise, or within tolerance
    assert {c["outputs"] for c in row[1:]} <= {"same", "noise"}
    error = row[0]["output_error"]
    assert error["reason"] == "values" and error["max_abs_error"] > 0.1
    assert error["against"] == {"variant": "numpy reference", "environment": WRONG}
    report = stack.http.get(f"/api/v1/jobs/{job['id']}/report.md").text
    assert report.splitlines()[0].endswith(f"its outputs differ on "
                                           f"{default_catalog().get(WRONG).release}.**")
    assert "outputs differ (values max abs" in report and "Reproduced with tvm-repro" in report
