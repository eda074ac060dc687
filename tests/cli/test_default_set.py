"""One default set of releases for the command line (tvmrepro.choice): `run --local` without
--env runs the newest release of each minor version, says so and names the releases it did not
probe; provisioning more changes no default of `up` or `worker`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.commands.service import default_environments
from tests.cli.command_line import tvmrepro
from tests.conftest import OLD_ENV
from tvmrepro.choice import DEFAULT_WHY
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings

CPU = [env.id for env in default_catalog().environments if env.device == "cpu"]
DEFAULT = [env.id for env in default_catalog().spanning("cpu")]


def test_provisioning_more_changes_no_default_of_up_or_worker(
        tmp_path: Path, test_home: Path, tvm_envs: dict[str, Environment]) -> None:
    assert OLD_ENV not in DEFAULT  # provisioned here, and no release of the default set
    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    for env_id in tvm_envs:
        (home / "envs" / env_id).symlink_to(test_home / "envs" / env_id)
    settings = Settings(home=home)
    assert [env.id for env in default_environments(settings)] == DEFAULT
    also = [env.id for env in default_environments(settings, also_provisioned=True)]
    assert also == [env_id for env_id in CPU if env_id in {*DEFAULT, OLD_ENV}]


@pytest.mark.tvm
def test_run_local_without_env_runs_the_default_set_and_names_what_it_left_out(
        tmp_path: Path, test_home: Path, settings: Settings) -> None:
    from worker.environments.provision import provision

    for env_id in DEFAULT:
        provision(settings, default_catalog().get(env_id))
    script = tmp_path / "hello.py"
    script.write_text("print('hello')\n")
    left = [env_id for env_id in CPU if env_id not in DEFAULT]
    proc = tvmrepro("run", str(script), "--local", "--cold", "--json", home=test_home)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert [run["environment"] for run in answer["runs"]] == DEFAULT
    assert (answer["environments"], answer["environments_why"], answer["not_probed"]) == \
        (DEFAULT, DEFAULT_WHY, left)
    assert "provisioning" not in proc.stderr  # nothing beyond the default set was made
    proc = tvmrepro("run", str(script), "--local", "--cold", home=test_home)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())  # the table's caption, however it wraps
    assert f"on {', '.join(DEFAULT)} ({DEFAULT_WHY}); not probed: {', '.join(left)}" in said, \
        proc.stdout
