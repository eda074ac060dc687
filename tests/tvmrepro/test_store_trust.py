"""What one user's runs cannot do to another's, at the store: poison the cache with a load-made
verdict, hold the write lock while an oracle reads run text, or store without bound."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from tests.conftest import NEW_ENV, OLD_ENV
from tests.fakes.reducing_runtime import FakeReducingRuntime, fake_case
from tests.tvmrepro.job_rows import CAP, never_gone, new_job, result, two_variant_job
from tvmrepro.cases import parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.jobs.bisect.logic import make_options
from tvmrepro.jobs.bisect.steps import advance, start, stepper
from tvmrepro.jobs.oracles import OracleTooSlow, Verdict, judge, parse_oracle
from tvmrepro.jobs.settling import finish_run, settle
from tvmrepro.jobs.symbols import MAX_SYMBOLS
from tvmrepro.results import Result, Status
from tvmrepro.store import Store
from tvmrepro.store import schema as t
from tvmrepro.store.bisections import BisectionUpdate
from tvmrepro.store.rows import JobRow
from worker.narrowing.reduction import Options as ReduceOptions
from worker.narrowing.reduction import reduce_case
from worker.runtimes.base import Execution, SandboxJob


def finished(store: Store, key: str, outcome: Result) -> str:
    """A one-run job of this cache key, run and stored with `outcome`; the run's id."""
    job, (run,) = new_job(1, key=key)
    store.submit(job, [run], cap=CAP)
    store.claim(run.id, "h:1", 3, 5.0, never_gone)
    assert store.finish(run.id, outcome)
    return run.id


def crash(signal: str) -> Result:
    """A run killed by `signal`, as the runner words it."""
    return result(Status.CRASH).model_copy(update={"signal": signal,
                                                   "signature": f"crash: {signal}"})


def test_a_timeout_is_never_served_and_never_replaces_a_decisive_result(store: Store) -> None:
    # Only a timeout so far (a run beside a CPU hog): nothing is served, the case runs again.
    finished(store, "public", result(Status.TIMEOUT))
    assert store.cached_result("public") is None
    decisive = finished(store, "public", result(Status.ERROR))
    assert store.cached_result("public") == decisive
    # Later runs of the key, load-made or not, do not replace the first decisive answer.
    finished(store, "public", result(Status.TIMEOUT))
    finished(store, "public", crash("SIGKILL"))
    finished(store, "public", result(Status.OK))
    assert store.cached_results(["public"]) == {"public": decisive}


def test_a_sigkill_is_not_served_but_a_case_s_own_signal_is(store: Store) -> None:
    finished(store, "killed", crash("SIGKILL"))
    assert store.cached_result("killed") is None
    segfault = finished(store, "segv", crash("SIGSEGV"))
    assert store.cached_result("segv") == segfault


# Oracles over run text ---------------------------------------------------------------------

LONG_LOG = "a" * 5000 + "!"


def bisect_job(store: Store, oracle: str, bypass: bool = True) -> str:
    """A bisect job over the two founding environments whose runs' stderr is LONG_LOG, every run
    stored (not yet judged); its id."""
    case = parse_case({"script": "print('a' * 5000 + '!')\n", "timeout_s": 30})
    envs = [default_catalog().get(env_id) for env_id in (OLD_ENV, NEW_ENV)]
    options = make_options(case, envs, oracle=oracle, bypass_cache=bypass)
    job = JobRow(id=uuid.uuid4().hex, kind="bisect", case=case.model_dump(mode="json"),
                 environments=options.environments, variants=[options.variant],
                 created_at=time.time())
    for run in start(store, job, case, options, default_catalog(), CAP):
        store.claim(run.id, "h:1", 3, 5.0, never_gone)
        stored = result(Status.OK).model_copy(update={"environment": run.environment})
        stored.log.stderr = LONG_LOG
        assert store.finish(run.id, stored)
    return job.id


@contextmanager
def write_lock_held(store: Store) -> Iterator[None]:
    """Another writer holds the store's write lock (SQLite: one writer at a time) meanwhile."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.write() as conn:
            conn.execute(sa.text("UPDATE admission SET tickets = tickets + 1"))
            taken.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(10)
    try:
        yield
    finally:
        release.set()
        holder.join()


# (a+)+$ is the pattern measured to hold SQLite's write lock for 30 s with 30 characters of log;
# a+!$ an ordinary one, judged within its budget.
@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+$", "a+!$"])
def test_the_oracle_is_judged_without_the_write_lock(store: Store, pattern: str) -> None:
    job_id = bisect_job(store, f"regex:{pattern}")
    job, row = store.job(job_id), store.bisection(job_id)
    assert job is not None and row is not None
    judged: list[BisectionUpdate] = []
    # The step judges every run while another writer holds the lock: it needs none.
    with write_lock_held(store):
        stepping = threading.Thread(target=lambda: judged.append(
            stepper(store, default_catalog())(job, row)))
        stepping.start()
        stepping.join(30)
        assert judged, "judging the runs waited for the store's write lock"
    found = judged[0].result
    if pattern != "a+!$":  # backtracks without end on LONG_LOG: over its budget, named
        assert found["oracle_error"] and f"regex:{pattern}" in found["oracle_error"]
        assert {p["verdict"] for p in found["probes"]} == {"skip"}
        assert found["verdict"] == "inconclusive"
    else:
        assert found["oracle_error"] is None
        assert {p["verdict"] for p in found["probes"]} == {"bad"}
    # Then stored by compare and set, once.
    assert advance(store, job_id, default_catalog()) == []
    stored = store.bisection(job_id)
    assert stored is not None and stored["result"] == found and stored["seen"] == 2


def timed_write(store: Store) -> float:
    """Seconds one other user's submission takes, from submit to its stored result."""
    started = time.monotonic()
    finished(store, "other", result(Status.OK))
    return time.monotonic() - started


def test_other_writers_are_answered_while_a_catastrophic_oracle_is_judged(store: Store) -> None:
    # The same writes alone first, on this machine as loaded as it is now: the yardstick.
    alone = max(timed_write(store) for _ in range(5))
    job_id = bisect_job(store, "regex:(a|aa)+$")
    judging = threading.Thread(target=lambda: [advance(store, job_id, default_catalog())
                                               for _ in range(3)])
    judging.start()
    waits = []
    while judging.is_alive():  # other users' submissions meanwhile, each answered at once
        waits.append(timed_write(store))
    judging.join()
    # A writer that waited for the judging would wait as long as the pattern runs without its
    # budget (30 s on LONG_LOG); one answered beside it costs a few of its writes alone (the
    # judging shares the cores, and Python's lock, between its budgeted matches).
    assert waits and max(waits) < 1.0 + 10 * alone, (waits, alone)
    bisected = store.bisection(job_id)
    assert bisected is not None and bisected["result"]["oracle_error"]


def test_a_reduction_s_oracle_over_its_budget_is_an_error_naming_it() -> None:
    # The reducer judges each candidate with `judge`: over its budget, the reduction ends with
    # this error (worker/narrowing/run.py stores it as the job's answer).
    oracle = parse_oracle("regex:(a+)+$")
    with pytest.raises(OracleTooSlow, match=r"^oracle: regex:\(a\+\)\+\$ took longer"):
        judge(oracle, {"status": "error", "message": "", "log_text": LONG_LOG}, None)
    assert judge(parse_oracle("regex:a+!$"), {"status": "error", "log_text": LONG_LOG},
                 None) is Verdict.BAD


# Symbol traces ---------------------------------------------------------------------------

def naming(variant: str, names: list[str]) -> Result:
    """A failed result whose message names `names`, each a function of its one pass's table."""
    return Result.model_validate({
        "environment": "e", "variant": variant, "status": "error", "stage": "run",
        "message": "cannot find " + " ".join(names),
        "passes": [{"index": 0, "name": "P", "seconds": 0.0, "ir": "# ir",
                    "functions": [{"name": name, "kind": "PrimFunc"} for name in names]}]})


def test_symbol_traces_are_made_once_when_the_last_run_is_stored_and_capped(store: Store) -> None:
    job, (once, twice) = two_variant_job()
    store.submit(job, [once, twice], cap=CAP)
    names = [f"fused_{n}_gv" for n in range(3 * MAX_SYMBOLS)]
    for run in (once, twice):
        store.claim(run.id, "h:1", 3, 5.0, never_gone)
    finish_run(store, job.id, once.id, naming("once", names))
    half = store.job(job.id)
    assert half is not None and half.symbols is None  # not while a run is unfinished
    finish_run(store, job.id, twice.id, naming("twice", names))
    done = store.job(job.id)
    assert done is not None and done.symbols is not None
    assert [t.symbol for t in done.symbols][::2] == names[:MAX_SYMBOLS]
    # Read back as stored, not made again from the runs' tables: those changed, they did not.
    with store.write() as conn:
        conn.execute(t.results.update().values(data={"status": "error", "passes": []}))
    again = store.job(job.id)
    assert again is not None and again.symbols == done.symbols


def test_a_job_settled_by_an_older_version_gets_its_symbols_once(store: Store) -> None:
    job, runs = two_variant_job()
    store.submit(job, runs, cap=CAP)
    for run in runs:
        store.claim(run.id, "h:1", 3, 5.0, never_gone)
        finish_run(store, job.id, run.id, naming(run.variant, ["f_gv"]))
    with store.write() as conn:  # comparisons alone, as a list: what an older version stored
        conn.execute(t.comparisons.update().values(data=[]))
    old = store.job(job.id)
    assert old is not None and old.comparisons == [] and old.symbols is None
    settled = settle(store, job.id)
    assert settled is not None and [trace.symbol for trace in settled[1]] == ["f_gv", "f_gv"]
    now = store.job(job.id)
    assert now is not None and now.symbols == settled[1]


class LongLogRuntime(FakeReducingRuntime):
    """The reducer tests' runtime, its runs printing LONG_LOG."""

    def execute(self, job: SandboxJob) -> Execution:
        execution = super().execute(job)
        execution.stdout = LONG_LOG
        return execution


def test_a_reduction_stops_with_the_error_naming_an_oracle_over_its_budget() -> None:
    env = default_catalog().environments[0]
    started = time.monotonic()
    with pytest.raises(OracleTooSlow, match=r"^oracle: regex:\(a\+\)\+\$ took longer"):
        reduce_case(fake_case(),  # type: ignore[arg-type]
                    ReduceOptions(env=env, variant="v", oracle="regex:(a+)+$"), LongLogRuntime())
    assert time.monotonic() - started < 30  # one budget, not a stall
