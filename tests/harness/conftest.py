"""Fixtures of the harness's tests: an interpreter with TVM and the frontend packages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.direct import FRONTEND_ENV
from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings


@pytest.fixture(scope="session")
def frontend_python(settings: Settings) -> Path:
    """The Python of FRONTEND_ENV's frontend flavour (TVM, torch, onnx, onnxruntime at the pins
    of images/environments.toml), provisioned in the test home."""
    from worker.environments.provision import env_python, provision

    flavour = default_catalog().get(FRONTEND_ENV).with_frontends()
    provision(settings, flavour)
    return env_python(settings, flavour)
