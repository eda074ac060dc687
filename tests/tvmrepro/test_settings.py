"""Settings: every variable read in one place; a value that does not parse names its variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.cli import main
from tvmrepro.errors import BadInput
from tvmrepro.settings import DEFAULT_HOME, DEFAULT_PORT, MAX_QUEUED_RUNS, Settings


def test_defaults_and_names() -> None:
    settings = Settings.from_env({})
    assert (settings.home, settings.port, settings.max_queued_runs) == (
        DEFAULT_HOME, DEFAULT_PORT, MAX_QUEUED_RUNS)
    assert settings.redis_url is None and settings.wheelhouse is None
    read = Settings.from_env({"TVMREPRO_HOME": "~/elsewhere", "TVMREPRO_PORT": "9001",
                              "REDIS_URL": "redis://r:6379/2", "DATABASE_URL": "postgresql://d",
                              "DOCKER_HOST": "unix:///d.sock", "TVMREPRO_WHEELHOUSE": "/w",
                              "TVMREPRO_SANDBOX_CPUS": "1.5", "TVMREPRO_MAX_QUEUED_RUNS": ""})
    assert read.home == Path("~/elsewhere").expanduser() and read.port == 9001
    assert (read.redis_url, read.database_url, read.docker_host) == (
        "redis://r:6379/2", "postgresql://d", "unix:///d.sock")
    assert read.wheelhouse == Path("/w") and read.sandbox_cpus == 1.5
    assert read.max_queued_runs == MAX_QUEUED_RUNS  # empty counts as unset


def test_a_given_mapping_is_all_that_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TVMREPRO_PORT", "9002")
    assert Settings.from_env().port == 9002
    assert Settings.from_env({}).port == DEFAULT_PORT


@pytest.mark.parametrize(("environ", "message"), [
    ({"TVMREPRO_PORT": "abc"}, "TVMREPRO_PORT: not an integer: 'abc'"),
    ({"TVMREPRO_PORT": "70000"}, "TVMREPRO_PORT: input should be less than or equal to 65535"),
    ({"TVMREPRO_SANDBOX_CPUS": "two"}, "TVMREPRO_SANDBOX_CPUS: not a number: 'two'"),
    ({"TVMREPRO_MAX_DELIVERIES": "0"}, "TVMREPRO_MAX_DELIVERIES: input should be greater than 0"),
])
def test_a_bad_value_names_its_variable(environ: dict[str, str], message: str) -> None:
    with pytest.raises(BadInput) as bad:
        Settings.from_env(environ)
    assert str(bad.value).startswith(message)
    assert bad.value.field == message.split(":")[0]


def test_the_command_line_says_it_in_one_line_and_exits_2() -> None:
    result = CliRunner().invoke(main, ["env", "list"], env={"TVMREPRO_PORT": "abc"})
    assert result.exit_code == 2
    assert result.output.strip() == "error: TVMREPRO_PORT: not an integer: 'abc'"
