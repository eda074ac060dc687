"""The frontend tests' runtime: the default releases' frontend flavours, warm as a worker's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings
from worker.environments.provision import provision
from worker.runtimes.local import LocalRuntime


@pytest.fixture(scope="module")
def default_envs(settings: Settings) -> list[Environment]:
    """The releases a run answers on by default, with their frontend flavours provisioned."""
    envs = default_catalog().spanning("cpu")
    for env in envs:
        provision(settings, env)
        provision(settings, env.with_frontends())
    return envs


@pytest.fixture(scope="module")
def frontend_runtime(settings: Settings, default_envs: list[Environment]
                     ) -> Iterator[LocalRuntime]:
    """A worker's runtime: a warm sandbox of each flavour, forked by its zygote."""
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 1}))
    runtime.prewarm(default_envs)
    yield runtime
    runtime.close()
