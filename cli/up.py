"""`tvmrepro up`: the API and one worker in one command (embedded broker and store by default),
and the hand-over of other commands' runs to a live one on the same home (`on_warm_up`)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.liveness import process_token, token_alive
from tvmrepro.settings import Settings

if TYPE_CHECKING:
    from tvmrepro.cases import Case

Answer = TypeVar("Answer")
PR_SET_PDEATHSIG = 1
WORKER_STOP_S = 20.0
# While `up` serves, this file in its home says where: a `run --local` on the same home hands its
# runs to that worker's warm sandboxes (TVM already imported) instead of starting one of its own.
ANNOUNCEMENT = "up.json"


def default_environments(settings: Settings) -> list[Environment]:
    """One CPU environment per minor release, plus any other CPU one already provisioned here.

    Those not yet provisioned are made when the worker starts (a few seconds each with a
    warm package cache, a ~100 MB download each without).
    """
    catalog = default_catalog()
    chosen = {env.id for env in catalog.spanning("cpu")}
    chosen |= {env.id for env in provisioned_cpu(settings)}
    return [env for env in catalog.environments if env.id in chosen]


def provisioned_cpu(settings: Settings) -> list[Environment]:
    """The CPU environments provisioned here (what `up` serves besides its chosen ones)."""
    from worker.provision import provisioned

    return provisioned(settings, default_catalog().select(None, "cpu"))


def _die_with_parent() -> None:
    # The worker must not outlive `up` even when `up` is killed without a chance to clean up.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_worker(envs: list[Environment], follow_provisioned: bool = False
                 ) -> subprocess.Popen[bytes]:
    """A `tvmrepro worker` for these environments (and, following, every CPU environment
    provisioned on this home while it runs), as a child of this process."""
    args = [sys.executable, "-m", "cli", "worker"]
    for env in envs:
        args += ["--env", env.id]
    if follow_provisioned:
        args.append("--also-provisioned")
    return subprocess.Popen(args, preexec_fn=_die_with_parent)


@contextlib.contextmanager
def announced(settings: Settings, url: str, envs: list[Environment],
              follow_provisioned: bool = False) -> Iterator[None]:
    """<home>/up.json names this process, its URL, runtime and environments while it serves
    (`follows_provisioned`: and every CPU environment provisioned on this home)."""
    path = settings.home / ANNOUNCEMENT
    token = process_token()
    record = {"url": url, "process": token, "runtime": settings.runtime,
              "environments": [env.id for env in envs], "follows_provisioned": follow_provisioned}
    partial = path.with_name(f".{ANNOUNCEMENT}.{os.getpid()}")
    partial.write_text(json.dumps(record))
    partial.replace(path)  # whole or absent for a reader
    try:
        yield
    finally:
        # Only this process removes it: the API's processes are forked from it and unwind through
        # here when they exit; and another `up` may have taken over since.
        with contextlib.suppress(OSError, ValueError):
            if process_token() == token and json.loads(path.read_text()).get("process") == token:
                path.unlink()


@dataclass
class LiveUp:
    """A live `tvmrepro up` on this home, as it announced itself."""

    url: str
    runtime: str | None
    environments: set[str]
    follows_provisioned: bool  # its worker serves the environments provisioned here too


def live_up(settings: Settings) -> LiveUp | None:
    """The announcement of a live `tvmrepro up` on this home (url, runtime, environments, whether
    it follows the environments provisioned here); None when there is none, or its announcement
    is stale or unreadable."""
    try:
        record = json.loads((settings.home / ANNOUNCEMENT).read_text())
        found = LiveUp(url=str(record["url"]), runtime=record.get("runtime"),
                       environments=set(record["environments"]),
                       follows_provisioned=bool(record.get("follows_provisioned")))
        alive = token_alive(str(record["process"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if alive and found.follows_provisioned:
        # Its worker serves what was provisioned since it started within seconds; a run handed
        # to it before then is refused and runs here (run_locally).
        found.environments |= {env.id for env in provisioned_cpu(settings)}
    return found if alive else None


def warm_service(settings: Settings, runtime: str, env_ids: list[str]) -> str | None:
    """The URL of a live `tvmrepro up` on this home whose worker runs `runtime` sandboxes for
    every one of `env_ids`; None when there is none (or its announcement is stale or unreadable)."""
    found = live_up(settings)
    if found and found.runtime == runtime and set(env_ids) <= found.environments:
        return found.url
    return None


def local_url(host: str, port: int) -> str:
    """Where a client on this machine reaches an API bound to host:port."""
    reachable = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    return f"http://[{reachable}]:{port}" if ":" in reachable else f"http://{reachable}:{port}"


def up(settings: Settings, envs: list[Environment], host: str, port: int,
       follow_provisioned: bool = False) -> None:
    """Run a worker for `envs` in the background and the API in the foreground, until stopped
    (`follow_provisioned`: the worker also serves each CPU environment provisioned on this home
    while it runs)."""
    from service.server import serve

    worker = start_worker(envs, follow_provisioned)
    try:
        with announced(settings, local_url(host, port), envs, follow_provisioned):
            serve(settings, host, port)
    finally:
        # (An API process that gunicorn forked from this one unwinds through here too when it
        # exits; the worker is not its child, so its Popen neither signals nor waits for it.)
        worker.terminate()
        try:
            worker.wait(WORKER_STOP_S)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def run_on_service(case: Case, envs: list[Environment], variants: list[str],
                   server: str) -> list[dict[str, Any]]:
    """Run every variant in every environment on the service at `server`, its cache bypassed,
    and return the runs' full results, as a run here would (`run --local` beside `up`)."""
    from cli.remote import WARM_POLL_S, ApiClient, run_job

    client = ApiClient(server, reconnect_s=0)
    job = client.submit(run_job(case, envs, variants, bypass_cache=True))
    while not job.status.finished:
        job = client.job_after(job, WARM_POLL_S)
    return client.results(job)


def on_warm_up(runtime_name: str, env_ids: list[str],
               work: Callable[[str], Answer]) -> Answer | None:
    """`work(url)` on a live `tvmrepro up` on this home whose worker serves every one of
    env_ids (TVM imported there already); None when there is no such `up`, or it stopped or
    refused: the command then runs here (--cold asks for that at once)."""
    from cli.output import error_console
    from cli.remote import ServiceError

    url = warm_service(Settings.from_env(), runtime_name, env_ids)
    if url is None:
        return None
    error_console().print(f"running on the warm sandboxes of `tvmrepro up` at {url} "
                          "(--cold: sandboxes of this command's own)", highlight=False)
    try:
        return work(url)
    except (ServiceError, BadInput) as exc:  # it stopped, or its worker is not live yet
        error_console().print(f"{exc}; running here", highlight=False)
        return None
