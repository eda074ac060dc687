"""`tvmrepro serve`, `tvmrepro worker` and `tvmrepro up`: the service's processes, apart or the
API and one worker in one command (embedded broker and store by default)."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys

import click
import psutil

from cli.discovery import announced, local_url, provisioned_cpu
from cli.output import reports_errors
from tvmrepro.choice import DEFAULT_WHY, FLAG_WHY
from tvmrepro.choice import default_environments as default_set
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.liveness import process_token
from tvmrepro.settings import Settings

ALSO_PROVISIONED_HELP = ("Also every CPU environment provisioned on this home, now or while it "
                         "runs (`tvmrepro env provision`), beside --env's or the default set. "
                         "The local runtime only.")
PR_SET_PDEATHSIG = 1
WORKER_GRACE_S = 3.0  # a cold shutdown takes 1-2 s here; past this the worker is killed


def default_environments(settings: Settings, also_provisioned: bool = False) -> list[Environment]:
    """The default set (one CPU environment per minor release, tvmrepro.choice), plus, when
    asked, every other CPU one already provisioned here: provisioning more never changes what a
    worker serves unless --also-provisioned says so.

    Those not yet provisioned are made when the worker starts (a few seconds each with a
    warm package cache, a ~100 MB download each without).
    """
    catalog = default_catalog()
    chosen = {env.id for env in default_set(catalog)}
    if also_provisioned:
        chosen |= {env.id for env in provisioned_cpu(settings)}
    return [env for env in catalog.environments if env.id in chosen]


def serving_line(envs: list[Environment], named: bool, follow: bool) -> str:
    """What a worker serves and why, in words."""
    why = FLAG_WHY if named else DEFAULT_WHY
    later = (", and every CPU environment provisioned here, now or later (--also-provisioned)"
             if follow else "")
    return f"{', '.join(e.id for e in envs)} ({why}{later})"


def _die_with_parent() -> None:
    # The worker must not outlive `up` even when `up` is killed without a chance to clean up.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_worker(envs: list[Environment], follow_provisioned: bool = False
                 ) -> subprocess.Popen[bytes]:
    """A `tvmrepro worker` for these environments (and, following, every CPU environment
    provisioned on this home while it runs), as a child of this process; it makes their
    frontend flavours beside the serving, so that a first torch report finds them."""
    args = [sys.executable, "-m", "cli", "worker", "--frontends"]
    for env in envs:
        args += ["--env", env.id]
    if follow_provisioned:
        args.append("--also-provisioned")
    return subprocess.Popen(args, preexec_fn=_die_with_parent)


def up(settings: Settings, envs: list[Environment], host: str, port: int,
       follow_provisioned: bool = False) -> None:
    """Run a worker for `envs` in the background and the API in the foreground, until stopped
    (`follow_provisioned`: the worker also serves each CPU environment provisioned on this home
    while it runs)."""
    from service.server import serve

    worker = WorkerStop(start_worker(envs, follow_provisioned))
    try:
        with announced(settings, local_url(host, port), envs, follow_provisioned):
            serve(settings, host, port, on_stop=worker.begin)
    finally:
        # (An API process that gunicorn forked from this one unwinds through here too when it
        # exits; the worker is not its child, so its Popen neither signals nor waits for it.)
        worker.stop(settings)


class WorkerStop:
    """Stopping `up`'s worker within seconds, with the API: a cold shutdown (SIGQUIT), which
    ends the runs in progress and hands their messages back to the broker, not a warm one
    (SIGTERM), which waits up to a run's whole time limit. A worker still there after
    WORKER_GRACE_S (a pool process held by its sandboxes' warm-up) is killed with its
    processes. Either way each run in progress is run again when a worker next serves its
    environment: the broker hands it back, or the recovery sweep publishes it again (its claimer
    is gone; worker/recovery.py)."""

    def __init__(self, worker: subprocess.Popen[bytes]) -> None:
        self.worker, self.signalled = worker, False
        self.token = process_token(worker.pid)

    def begin(self) -> None:
        """Start the cold shutdown (once: a second SIGQUIT is Celery's hard shutdown)."""
        if not self.signalled and self.worker.poll() is None:
            self.signalled = True
            self.worker.send_signal(signal.SIGQUIT)

    def stop(self, settings: Settings) -> None:
        """Signal the worker if the API did not already, wait WORKER_GRACE_S, then kill."""
        self.begin()
        try:
            self.worker.wait(WORKER_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            pass
        try:
            tree = [psutil.Process(self.worker.pid)]
            tree += tree[0].children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        for process in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        self.worker.wait()
        click.echo(f"the worker did not stop within {WORKER_GRACE_S:g} s: killed; its runs in "
                   "progress run again at the next start", err=True)
        _clean_after_kill(settings, self.token)


def _clean_after_kill(settings: Settings, token: str) -> None:
    """What a killed worker did not do itself: deregister, and remove its sandboxes (making a
    runtime sweeps what dead processes of this host left)."""
    from tvmrepro.store import open_store
    from worker.runtimes import make_runtime

    try:
        store = open_store(settings.store_url, pooled=False, artifacts=settings.artifacts_dir)
        try:
            store.forget_worker(token)
        finally:
            store.dispose()
        make_runtime(settings.runtime, settings)
    except Exception as exc:  # the next start sweeps and the heartbeat goes stale anyway
        click.echo(f"cleaning up after the worker failed: {exc}", err=True)


def _service_settings() -> Settings:
    """Settings for a process of the service, with its home and store made (or one clear error)."""
    from tvmrepro.store import open_store

    settings = Settings.from_env()
    settings.ensure_home()
    open_store(settings.store_url, artifacts=settings.artifacts_dir)
    return settings


@click.command("serve")
@click.option("--host", default=None, help="Address to bind (default $TVMREPRO_HOST, else 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default $TVMREPRO_PORT, else 8000).")
@reports_errors
def serve_command(host: str | None, port: int | None) -> None:
    """Serve the HTTP API (gunicorn); workers run separately (tvmrepro worker)."""
    from service.server import serve

    serve(_service_settings(), host, port)


@click.command("worker")
@click.option("--env", "env_ids", multiple=True,
              help="Environment whose runs this worker takes (repeatable; default: as for "
                   "`tvmrepro up`, the newest CPU release of each minor version).")
@click.option("--concurrency", type=int, default=None,
              help="Runs at once (default $TVMREPRO_WORKER_CONCURRENCY, else one per core, "
                   "at least 2).")
@click.option("--loglevel", default="INFO", help="Celery log level.")
@click.option("--also-provisioned", is_flag=True, help=ALSO_PROVISIONED_HELP)
@click.option("--frontends", is_flag=True,
              help="Make the environments' frontend flavours (torch, onnx, onnxruntime) now, "
                   "while serving, instead of at the first report that imports them.")
@reports_errors
def worker_command(env_ids: tuple[str, ...], concurrency: int | None, loglevel: str,
                   also_provisioned: bool, frontends: bool) -> None:
    """Take runs of these environments from the broker (provisioning them, or building their
    images, first)."""
    from tvmrepro.queue import worker_concurrency
    from worker.process import run_worker

    settings = _service_settings()
    envs = ([default_catalog().get(i, "--env") for i in env_ids]
            or default_environments(settings, also_provisioned))
    click.echo(f"worker for {serving_line(envs, bool(env_ids), also_provisioned)}", err=True)
    run_worker(settings, envs, concurrency or worker_concurrency(settings), loglevel,
               follow_provisioned=also_provisioned, frontends=frontends)


@click.command("up")
@click.option("--port", type=int, default=None, help="Port (default $TVMREPRO_PORT, else 8000).")
@click.option("--host", default=None, help="Address to bind (default $TVMREPRO_HOST, else 127.0.0.1).")
@click.option("--env", "env_ids", multiple=True,
              help="Environments for the worker (default: the newest CPU release of each minor "
                   "version; --also-provisioned adds the CPU ones provisioned here).")
@click.option("--also-provisioned", is_flag=True, help=ALSO_PROVISIONED_HELP)
@reports_errors
def up_command(port: int | None, host: str | None, env_ids: tuple[str, ...],
               also_provisioned: bool) -> None:
    """The API and a worker in one command (no Redis needed: embedded broker and SQLite)."""
    settings = _service_settings()
    envs = ([default_catalog().get(i, "--env") for i in env_ids]
            or default_environments(settings, also_provisioned))
    follow = also_provisioned and settings.runtime == "local"
    click.echo(f"tvm-repro on http://{host or settings.host}:{port or settings.port} "
               f"(worker for {serving_line(envs, bool(env_ids), follow)})", err=True)
    up(settings, envs, host or settings.host, port or settings.port, follow)
