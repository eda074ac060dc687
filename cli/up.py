"""`tvmrepro up`: the API and one worker in one command (embedded broker and store by default)."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys

from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings

PR_SET_PDEATHSIG = 1
WORKER_STOP_S = 20.0


def default_environments(settings: Settings) -> list[Environment]:
    """One CPU environment per minor release, plus any other CPU one already provisioned here.

    Those not yet provisioned are made when the worker starts (a few seconds each with a
    warm package cache, a ~100 MB download each without).
    """
    from worker.provision import read_fingerprint

    catalog = default_catalog()
    chosen = {env.id for env in catalog.spanning("cpu")}
    chosen |= {env.id for env in catalog.select(None, "cpu") if read_fingerprint(settings, env)}
    return [env for env in catalog.environments if env.id in chosen]


def _die_with_parent() -> None:
    # The worker must not outlive `up` even when `up` is killed without a chance to clean up.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_worker(envs: list[Environment]) -> subprocess.Popen[bytes]:
    """A `tvmrepro worker` for these environments, as a child of this process."""
    args = [sys.executable, "-m", "cli", "worker"]
    for env in envs:
        args += ["--env", env.id]
    return subprocess.Popen(args, preexec_fn=_die_with_parent)


def up(settings: Settings, envs: list[Environment], host: str, port: int) -> None:
    """Run a worker for `envs` in the background and the API in the foreground, until stopped."""
    from service.server import serve

    worker = start_worker(envs)
    try:
        serve(settings, host, port)
    finally:
        worker.terminate()
        try:
            worker.wait(WORKER_STOP_S)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
