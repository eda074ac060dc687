"""The one task: run one stored (variant, environment) and store its result, idempotently.

The task carries only a run id. It claims the run in the job store first: a
run that is done (a redelivery, a republished duplicate) or that a live
process holds is dropped; a run delivered more than `max_deliveries` times
(its worker keeps dying) ends as infra_error instead of looping. The result is
stored with a conditional write, so a run never has two. A result the store
refuses (anything but the store being away) is replaced at once by that run's
infra_error naming the reason, not redelivered.

Each worker process keeps warm sandboxes for the environments its worker serves
(`prewarm`: from the moment the process starts when they fit in memory, see
worker/runtimes/warm.py; else each from its first run).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import traceback
from dataclasses import dataclass
from functools import partial

from celery import Celery, Task, current_app, shared_task
from celery.signals import worker_process_init, worker_process_shutdown

from tvmrepro.attachments import with_contents
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.jobs.bisect.steps import after_run as bisection_step
from tvmrepro.jobs.kind import Publish
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.jobs.narrow.steps import narrowing
from tvmrepro.jobs.release import release_quietly, releaser
from tvmrepro.jobs.settling import finish_run, settle_quietly
from tvmrepro.jobs.stored_ir import within_job_ir_cap
from tvmrepro.lifecycle import Action, Claim, RunState
from tvmrepro.liveness import claimer_gone, process_token
from tvmrepro.queue import RUN_TASK, SETTLE_TASK, worker_concurrency
from tvmrepro.results import Result, Status
from tvmrepro.settings import Settings
from tvmrepro.store import Store, StoreAway
from tvmrepro.store.notices import notices_for
from worker.github import after_run as bot_after_run
from worker.narrowing.run import run_narrowing
from worker.runner import run_variant
from worker.runtimes import make_runtime
from worker.runtimes.base import Execution, Fingerprint, Runtime, SandboxJob

log = logging.getLogger(__name__)
STORE_RETRIES = 5  # a store that is briefly away (restart, failover) is waited for


@dataclass
class WorkerContext:
    """What one worker process needs to run tasks (made after the fork, once per process)."""

    settings: Settings
    store: Store
    runtime: Runtime
    pid: int


_context: WorkerContext | None = None


_context_lock = threading.Lock()


def context(app: Celery) -> WorkerContext:
    """This process's context; made on first use so that no connection crosses a fork."""
    with _context_lock:
        return _make_context(app)


def _make_context(app: Celery) -> WorkerContext:
    global _context
    settings: Settings = app.conf.get("tvmrepro_settings") or Settings.from_env()
    if _context is None or _context.pid != os.getpid() or _context.settings != settings:
        # Its writes announce the jobs they change (the API's long-polls wake on them).
        notices = notices_for(settings.redis_url, settings.redis_prefix)
        _context = WorkerContext(settings, Store(settings.store_url, notices=notices,
                                                 artifacts=settings.artifacts_dir),
                                 make_runtime(settings.runtime, settings), os.getpid())
        served = app.conf.get("tvmrepro_environments") or []
        if served:
            catalog = default_catalog()
            processes = int(app.conf.get("worker_concurrency") or worker_concurrency(settings))
            _context.runtime.prewarm([catalog.get(env_id) for env_id in served], processes)
    return _context


@worker_process_init.connect
def _warm_at_start(**_: object) -> None:
    """A pool process makes its context (and starts its warm sandboxes) before its first run.

    In a thread: a process's start must not wait for it (Celery times process starts out).
    """
    def prepare() -> None:
        try:
            context(current_app)
        except Exception:  # the first task makes it again and reports the fault with its run
            log.exception("could not prepare the worker process")

    threading.Thread(target=prepare, daemon=True).start()


@worker_process_shutdown.connect
def _close_at_exit(**_: object) -> None:
    """A pool process that stops removes its waiting sandboxes (warm containers included)."""
    if _context is not None and _context.pid == os.getpid():
        _context.runtime.close()


def infra_error(claim: Claim, error_type: str, message: str, log_text: str = "") -> Result:
    """The result of a run that the service, not the case, failed."""
    return Result.model_validate({
        "environment": claim.environment, "variant": claim.variant,
        "status": Status.INFRA_ERROR, "error_type": error_type, "message": message,
        "signature": f"{error_type}: {message}", "log": {"stderr": log_text}})


class Cancellable:
    """The worker's runtime for one claimed run: while the run goes, its sandbox asks the store
    every CANCEL_POLL_S whether the run got a result elsewhere (its job was cancelled: the API
    stored the run's `Cancelled`) and is killed then, freeing its slot. A store poll, not a
    broadcast: it needs nothing of the broker (Redis or the embedded one) and a worker that was
    away when the job was cancelled still sees it."""

    def __init__(self, runtime: Runtime, store: Store, claim: Claim) -> None:
        self.runtime, self.store, self.claim = runtime, store, claim
        self.name = runtime.name

    def cancelled(self) -> bool:
        """Whether the run is settled already (or its job is gone)."""
        row = self.store.run(self.claim.job_id, self.claim.run_id)
        return row is None or row.state == RunState.DONE

    def execute(self, job: SandboxJob) -> Execution:
        """The run, stopped when it is cancelled."""
        return self.runtime.execute(dataclasses.replace(job, cancelled=self.cancelled))

    def fingerprint(self, env: Environment) -> Fingerprint:
        """The runtime's fingerprint of env."""
        return self.runtime.fingerprint(env)

    def prewarm(self, envs: list[Environment], processes: int = 1) -> None:
        """The runtime's own."""
        self.runtime.prewarm(envs, processes)

    def reserve(self, env: Environment, timeout_s: int, memory_mb: int, count: int = 1) -> None:
        """The runtime's own."""
        self.runtime.reserve(env, timeout_s, memory_mb, count)

    def start_zygotes(self, envs: list[Environment]) -> None:
        """The runtime's own."""
        self.runtime.start_zygotes(envs)

    def close(self) -> None:
        """Nothing of its own: the runtime is the worker's, closed with its process."""


def execute(ctx: WorkerContext, claim: Claim) -> Result:
    """Run a claimed run; any fault of ours becomes an infra_error result, never a retry loop."""
    if claim.action is Action.EXHAUSTED:
        message = (f"the run was started {claim.deliveries} times and its worker was lost "
                   "every time")
        return infra_error(claim, "WorkerLost", message)
    try:
        env = default_catalog().get(claim.environment)
        # The files the stored case names by digest, their contents from the store.
        case = with_contents(parse_case(claim.case), ctx.store.blobs)
        runtime = Cancellable(ctx.runtime, ctx.store, claim)
        narrowing_row = narrowing(ctx.store, claim.job_id) if KINDS[claim.kind].narrowing \
            else None
        if narrowing_row is not None:  # a reduce or extract job's one run
            return run_narrowing(ctx.store, runtime, claim.run_id, claim.job_id, case, env,
                                 narrowing_row.options)
        return run_variant(case, claim.variant, env, runtime, run_id=claim.run_id,
                           job_id=claim.job_id)
    except Exception as exc:  # a fault of the service: say so in the result
        log.exception("run %s failed in the worker", claim.run_id)
        return infra_error(claim, type(exc).__name__, str(exc) or repr(exc),
                           traceback.format_exc())


def finish(ctx: WorkerContext, claim: Claim, result: Result) -> bool:
    """Store the result (its IR within the job's cap: tvmrepro.jobs.stored_ir); one the store
    refuses becomes the run's infra_error with the reason."""
    try:
        kept = within_job_ir_cap(ctx.store, claim.job_id, result, ctx.settings.job_ir_cap)
        return finish_run(ctx.store, claim.job_id, claim.run_id, kept)
    except StoreAway:
        raise  # the store is away: retried by the task
    except Exception as exc:
        log.exception("the store refused the result of run %s", claim.run_id)
        reason = f"the store refused the result: {type(exc).__name__}: {str(exc)[:500]}"
        return finish_run(ctx.store, claim.job_id, claim.run_id,
                          infra_error(claim, "StoreError", reason))


def late_finish(ctx: WorkerContext, claim: Claim) -> None:
    """Log a result the store refused because the run has one already: another process took
    the run over and stored it first (this host was frozen or cut off past its lease, or the
    run silent past its time limit). Nothing else is to be done: the run keeps that result."""
    row = ctx.store.run(claim.job_id, claim.run_id)
    log.warning("run %s already had a result (claimed since by %s): this one is dropped",
                claim.run_id, row.claimed_by if row is not None else None)


@shared_task(name=RUN_TASK, bind=True, autoretry_for=(StoreAway,),
             max_retries=STORE_RETRIES, retry_backoff=True, retry_jitter=False)
def run(self: Task, run_id: str) -> str:
    """Claim, run and store one run; says what it did (run, skipped, duplicate)."""
    ctx = context(self.app)
    settings = ctx.settings
    # A claim of another host is taken over once that host has no live worker (the lease).
    gone = partial(claimer_gone, live_hosts=ctx.store.live_hosts(settings.worker_stale_s))
    claim = ctx.store.claim(run_id, process_token(), settings.max_deliveries,
                            settings.claim_grace_s, gone)
    if claim.action is Action.SKIP:
        return "skipped"
    stored = finish(ctx, claim, execute(ctx, claim))
    if not stored:
        late_finish(ctx, claim)
    # What the job's kind does after a run: a bisection's next step, a triage's known issues.
    KINDS[claim.kind].after_run(ctx.store, releaser(ctx.store, self.app, settings), claim.job_id)
    # Its slot is free: the next held run of its lane goes (tvmrepro.jobs.release).
    release_quietly(ctx.store, self.app, [claim.environment], settings)
    bot_after_run(self.app, ctx.store, claim.job_id)  # the GitHub bot's issues it finished
    return "stored" if stored else "duplicate"



def settle_job(store: Store, publish: Publish, job_id: str) -> None:
    """What a job's finisher left undone (the recovery sweep found it): a bisection's step, its
    next probes published (which settles the job too), else the job's comparisons."""
    if store.bisection(job_id) is not None:
        bisection_step(store, publish, job_id)
    else:
        settle_quietly(store, job_id)


@shared_task(name=SETTLE_TASK, bind=True, autoretry_for=(StoreAway,),
             max_retries=STORE_RETRIES, retry_backoff=True, retry_jitter=False)
def settle(self: Task, job_id: str) -> str:
    """`settle_job`, in a pool process, beside the runs: never in the worker's main process,
    whose recovery sweep found it on the thread that heartbeats."""
    ctx = context(self.app)
    settle_job(ctx.store, releaser(ctx.store, self.app, ctx.settings), job_id)
    return "settled"
