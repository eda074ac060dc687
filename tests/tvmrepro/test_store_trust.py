"""What one user's runs cannot do to another's, at the store: poison the cache with a load-made
verdict, hold the write lock while an oracle reads run text, or store without bound."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tvmrepro.test_store import CAP, never_gone, new_job, result
from tvmrepro.results import Result, Status
from tvmrepro.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """An empty SQLite store (the database whose one write lock every user shares)."""
    opened = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    opened.create_schema()
    yield opened
    opened.dispose()


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
