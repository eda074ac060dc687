"""The tracker's real runs: two failures on the newest founding environment, made once per
session (the known-issue and export tests both read them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.conftest import NEW_ENV, case_path
from tvmrepro.cases import Case, load_case_file
from tvmrepro.jobs.tracker.importing import import_file
from tvmrepro.results import Result

if TYPE_CHECKING:
    from tvmrepro.environments import Environment
    from worker.runtimes.local import LocalRuntime

CORPUS = Path(__file__).parent / "corpus"


def founding_case() -> Case:
    """apache/tvm#17357's case (tests/cases/tvm-17357), a report of its own."""
    return load_case_file(case_path("tvm-17357/case.json"))


def segfault_case() -> Case:
    """The corpus's #20191 script, a segfault in the VM (as #17348's)."""
    return next(r for r in import_file(CORPUS / "issues.json") if r.number == 20191).case()


@pytest.fixture(scope="session")
def new_failures(tvm_envs: dict[str, Environment],
                 warm_runtime: LocalRuntime) -> dict[str, Result]:
    """The founding case's failing variant and #20191's script run on the newest founding
    environment: "error" and "crash" -> its result."""
    from worker.runner import run_variant

    env = tvm_envs[NEW_ENV]
    segfault = segfault_case()
    return {"error": run_variant(founding_case(), "fusetir-once", env, warm_runtime),
            "crash": run_variant(segfault, segfault.variant_names[0], env, warm_runtime)}
