"""The two wording-drift cases (tests/cases/*-message), real TVM on the founding environments.

Each is one error that every release raises, worded differently between 0.25.0 and
0.27.0.post1 (their NOTES.md tables, measured on the ten CPU releases). A run must report the
words each release prints, and the signature must still treat the two as one error: the
signature oracle answers `unchanged`. The NOTES record, from an older tree, the signatures that
drifted (a different frame on 0.27.0.post1) and the bisection that drift caused.
"""

from __future__ import annotations

import pytest

from tests.cli.command_line import bisect_json, run_json
from tests.conftest import NEW_ENV, OLD_ENV, case_path
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(600)]

# case -> (stage, environment -> the start of "error_type: message", as the NOTES table has it).
REWORDED: dict[str, tuple[str, dict[str, str]]] = {
    "relax-add-dtype-mismatch-message": ("parse", {
        OLD_ENV: "DiagnosticError: error: Binary operators must have the same datatype for both "
                 "operands.  However, R.add(x, y) uses datatype float32 on the LHS (StructInfo of",
        NEW_ENV: "DiagnosticError: error: Binary operators must have the same datatype for both "
                 "operands.  However, R.add(x, y) uses datatype T.float32 on the LHS (Type of R.T",
    }),
    "tirx-int32-literal-overflow-message": ("build", {
        OLD_ENV: "ValueError: Check failed: value < 1LL << (dtype.bits() - 1) (2147483648 vs. "
                 "2147483648) : Literal value 2147483648 exceeds maximum of int32",
        NEW_ENV: "ValueError: Check failed: (small.has_value() && (bits == 64 || (*small >= "
                 "-(int64_t{1} << (bits - 1)) && *small < (int64_t{1} << (bits - 1))))) is false",
    }),
}


@pytest.mark.parametrize("name", sorted(REWORDED))
def test_each_release_words_it_its_own_way_under_one_signature(
        name: str, settings: Settings, tvm_envs: dict[str, Environment]) -> None:
    stage, words = REWORDED[name]
    runs = {run["environment"]: run for run in run_json(case_path(f"{name}/case.json"),
                                                        settings.home)}
    assert sorted(runs) == sorted(words)
    for env_id, expected in words.items():
        run = runs[env_id]
        assert (run["status"], run["stage"]) == ("error", stage), (env_id, run)
        assert f"{run['error_type']}: {run['message']}".startswith(expected), (env_id, run)
    signatures = {env_id: run["signature"] for env_id, run in runs.items()}
    assert signatures[OLD_ENV] == signatures[NEW_ENV], signatures


@pytest.mark.parametrize("name", sorted(REWORDED))
def test_the_signature_oracle_sees_no_change(
        name: str, settings: Settings, tvm_envs: dict[str, Environment]) -> None:
    found = bisect_json(case_path(f"{name}/case.json"), "--env", OLD_ENV, "--env", NEW_ENV,
                        "--oracle", "signature", home=settings.home)
    assert found["verdict"] == "unchanged", found
    assert [p["verdict"] for p in found["probes"]] == ["bad", "bad"], found
