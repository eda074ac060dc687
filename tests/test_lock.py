"""The lock files pin every dependency that pyproject.toml asks for (`make lock` makes them)."""

from __future__ import annotations

import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO
from worker.environments.images import SERVICE_BUILD_REQUIREMENTS, service_requirements


def pins(name: str) -> dict[str, str]:
    """Package -> pinned version of a lock file."""
    found = {}
    for line in (REPO / name).read_text().splitlines():
        if line.strip() and not line[0].isspace() and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            found[canonicalize_name(requirement.name)] = spec.version
    return found


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize(("lock", "wanted"), [
    ("requirements.lock", PROJECT["dependencies"]),
    ("requirements-dev.lock", PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"]),
])
def test_every_dependency_is_pinned_within_its_range(lock: str, wanted: list[str]) -> None:
    pinned = pins(lock)
    for line in wanted:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not in {lock}: run make lock"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{lock} pins {name}=={pinned[name]}, outside {requirement.specifier}: run make lock")


def test_the_dev_lock_has_the_service_pins() -> None:
    service, dev = pins("requirements.lock"), pins("requirements-dev.lock")
    assert {name: dev.get(name) for name in service} == service


def test_the_service_image_installs_the_locked_versions() -> None:
    wanted = [Requirement(r) for r in service_requirements()
              if r not in SERVICE_BUILD_REQUIREMENTS]
    assert {canonicalize_name(r.name): str(r.specifier) for r in wanted} == {
        name: f"=={version}" for name, version in pins("requirements.lock").items()}
