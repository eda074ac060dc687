"""A harness that ends before it starts the case is the service's fault (infra_error), not the case's.

What the runtime saw is given as an Execution (no TVM or sandbox adds anything to
how the runner reads it); the same exit after the harness's "start" event is the
case's own exit.
"""

from __future__ import annotations

from tests.conftest import NEW_ENV
from tvmrepro.environments import default_catalog
from worker.runner import assemble_result
from worker.runtimes.base import Execution, SandboxJob

JOB = SandboxJob(run_id="r", job_id="j", env=default_catalog().get(NEW_ENV),
                 case={"script": "print(1)\n", "timeout_s": 60, "memory_mb": 1024},
                 variant="script")


def test_an_exit_before_the_start_event_is_a_harness_failure() -> None:
    result = assemble_result(JOB, Execution(events=[], returncode=1,
                                            stderr="ModuleNotFoundError: No module named 'x'"))
    assert (result.status, result.error_type) == ("infra_error", "HarnessFailed")
    assert result.message == ("the harness ended with exit status 1 before it could start "
                              "the case")


def test_the_same_exit_after_the_start_event_is_the_case_s() -> None:
    started = Execution(events=[{"event": "start"}], returncode=1)
    result = assemble_result(JOB, started)
    assert (result.status, result.error_type) == ("error", "Exit")
