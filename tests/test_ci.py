"""The suite's one way to know it runs under CI, and what a test that cannot run does there."""

from __future__ import annotations

import pytest

from tests.fixtures.ci import cannot_run, in_ci


@pytest.mark.parametrize(("environ", "ci"), [
    ({}, False),
    ({"CI": "true"}, True),
    ({"CI": "1"}, True),
    ({"CI": "TRUE"}, True),
    ({"CI": "false"}, False),
    ({"CI": ""}, False),
    ({"GITHUB_ACTIONS": "true"}, False),  # Actions sets CI=true as well: CI alone decides
])
def test_ci_is_what_the_ci_variable_says(environ: dict[str, str], ci: bool) -> None:
    assert in_ci(environ) is ci


def test_under_ci_a_test_that_cannot_run_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI runs every test, but frob is missing"):
        cannot_run("frob is missing")


def test_elsewhere_a_test_that_cannot_run_is_skipped_saying_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="^frob is missing$"):
        cannot_run("frob is missing")
