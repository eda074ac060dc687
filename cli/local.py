"""What the commands that run here (--local) share: their runtime, with the environments they
need provisioned (said on stderr, as it can take a minute) and one TVM import per environment."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cli.output import error_console
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.runtimes import make_runtime
from worker.runtimes.base import Fingerprint, Runtime


def fingerprints_announced(runtime: Runtime, settings: Settings,
                           envs: list[Environment]) -> dict[str, Fingerprint]:
    """Each environment's fingerprint from `runtime` (the local runtime provisions what is
    missing first: say so, as it can take a minute, rather than be silent)."""
    from worker.environments.provision import read_fingerprint

    missing = [env.id for env in envs if read_fingerprint(settings, env) is None]
    if missing and runtime.name == "local":
        error_console().print(f"provisioning {', '.join(missing)} (a download the first time, "
                              "seconds from the package cache) ...", highlight=False)
    return {env.id: runtime.fingerprint(env) for env in envs}


@contextlib.contextmanager
def local_runtime(runtime_name: str, envs: list[Environment]) -> Iterator[Runtime]:
    """The runtime of a command that runs here, with envs provisioned where they are missing
    (said on stderr), closed at the end. Its runs share one TVM import per environment: where
    sandboxes are forked (the local runtime), each environment's zygote is started first and
    forks them all."""
    settings = Settings.from_env()
    runtime = make_runtime(runtime_name, settings)
    try:
        fingerprints_announced(runtime, settings, envs)
        runtime.start_zygotes(envs)
        yield runtime
    finally:
        runtime.close()
