"""A starting worker says what it provisions before it serves anything (a minute or more the
first time, before Celery's own log begins)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import NEW_ENV, OLD_ENV
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings
from worker.process import provisioning_notice


def test_a_worker_names_the_environments_it_provisions_first(
        tmp_path: Path, test_home: Path, tvm_envs: dict[str, Environment]) -> None:
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_RUNTIME": "local"})
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / OLD_ENV).symlink_to(test_home / "envs" / OLD_ENV)  # provisioned
    envs = [default_catalog().get(env_id) for env_id in (OLD_ENV, NEW_ENV)]
    notice = provisioning_notice(settings, envs)
    assert notice is not None and notice.startswith(
        f"worker: provisioning {NEW_ENV} before serving anything (a ~100 MB download")
    assert provisioning_notice(settings, envs[:1]) is None  # nothing to wait for
    docker = Settings.from_env({"TVMREPRO_HOME": str(tmp_path), "TVMREPRO_RUNTIME": "docker"})
    assert provisioning_notice(docker, envs) is None  # it runs images: nothing is provisioned
