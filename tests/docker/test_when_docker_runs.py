"""When the Docker tests run, skip or must run: CI never skips them silently."""

from __future__ import annotations

import pytest

from tests.fixtures.docker_engine import docker_tests_wanted


@pytest.mark.parametrize(("environ", "wanted"), [
    ({}, None),
    ({"TVMREPRO_WITH_DOCKER": "1"}, True),
    ({"TVMREPRO_WITH_DOCKER": "0"}, False),
    ({"TVMREPRO_WITH_DOCKER": "0", "CI": "true"}, True),
    ({"CI": "true"}, True),
    ({"CI": "false", "TVMREPRO_WITH_DOCKER": "false"}, False),
])
def test_who_decides(environ: dict[str, str], wanted: bool | None) -> None:
    assert docker_tests_wanted(environ) is wanted


def test_a_value_that_means_nothing_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="TVMREPRO_WITH_DOCKER='maybe'"):
        docker_tests_wanted({"TVMREPRO_WITH_DOCKER": "maybe"})
