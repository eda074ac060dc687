"""A bisection's transitions, each with its commit window and ranked suspects.

Every transition between two releases gets, when a history is known, a `window` (the commits
between the two releases' builds, docs/contract.md "Commit windows and suspects") and `suspects`
(tvmrepro.jobs.bisect.suspects ranks them by the evidence of the transition's failing run and the case).
A release's commit comes from its runs' `tvm.commit` (the environment's fingerprint), else from
the commits the caller knows. The local command line and the service's bisection step both
call `annotate`; the history named by TVMREPRO_TVM_HISTORY is opened once per process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from tvmrepro.errors import ReproError
from tvmrepro.history import HOME_INDEX, History, Window, open_history, window
from tvmrepro.jobs.bisect.suspects import evidence, rank
from tvmrepro.jobs.bounded import TooSlow, within
from tvmrepro.results import FAILING
from tvmrepro.settings import Settings

log = logging.getLogger(__name__)
# What reading the failing runs' text (tvmrepro.jobs.bounded) may take in one bisection's step,
# all its transitions together: past it, the transitions left get their windows, no suspects.
SUSPECTS_BUDGET_S = 5.0
# A probe's first run's full result (with "log_text" where the log is known), by environment.
ResultOf = Callable[[str], dict[str, Any] | None]


@lru_cache(maxsize=4)
def _opened(spec: str | None, home: str, stamp: int = 0) -> History | None:
    # `stamp`: the home index's mtime, so that a running service takes the one that
    # `tvmrepro history update` writes at its next bisection.
    return open_history(spec, Path(home))


def configured_history(settings: Settings | None = None) -> History | None:
    """TVMREPRO_TVM_HISTORY's history (or the shipped commit index); None when there is
    none or it cannot be read (logged: a bisection still answers without suspects)."""
    settings = settings or Settings.from_env()
    try:
        index = settings.home / HOME_INDEX
        stamp = index.stat().st_mtime_ns if not settings.tvm_history and index.is_file() else 0
        return _opened(settings.tvm_history, str(settings.home), stamp)
    except ReproError as exc:
        log.warning("no commit history for suspects: %s", exc)
        return None


@lru_cache(maxsize=64)
def _window(history: History, before: str | None, after: str | None) -> Window:
    return window(history, before, after)  # a history is hashed by identity


def commit_of(result: dict[str, Any] | None) -> str | None:
    """The TVM commit a run's environment was built from, as its result's `tvm` says."""
    return ((result or {}).get("tvm") or {}).get("commit")


def annotate(found: dict[str, Any], result_of: ResultOf, case: dict[str, Any],
             history: History | None, commits: Mapping[str, str | None] | None = None,
             ) -> dict[str, Any]:
    """`found` (a bisect object) with `window` and `suspects` on each transition; unchanged
    without a history."""
    if history is None:
        return found
    commits = commits or {}
    deadline = time.monotonic() + SUSPECTS_BUDGET_S  # every transition's, together
    for change in found.get("transitions") or []:
        before, after = result_of(change["before"]), result_of(change["after"])
        try:
            span = _window(history, commit_of(before) or commits.get(change["before"]),
                           commit_of(after) or commits.get(change["after"]))
        except (ReproError, OSError) as exc:
            # A history that fails (git gone, a file unreadable) costs the suspects only.
            log.warning("no commit window for %s -> %s: %s", change["before"],
                        change["after"], exc)
            continue
        # The failing side: the later release of a regression, the earlier one of a fix.
        regression = change["to"] == "bad"
        failing, other = (after, before) if regression else (before, after)
        if failing is not None and failing.get("status") == "ok":
            failing = None  # a wrong result: no frame, only what the case exercises
        # Both sides fail (a signature or regex oracle): what changed is the error's wording.
        reworded = (other or {}).get("status") in FAILING
        change["window"] = span.to_json(history.name) | {"history_newest": history.newest()}
        try:
            with within(deadline - time.monotonic()):
                clues = evidence("regression" if regression else "fix", failing, case,
                                 found.get("variant"), reworded=reworded)
                change["suspects"] = [s.to_json() for s in rank(span.commits, clues, span.picked)]
        except TooSlow as exc:  # a forged message or log costs its suspects, never the step
            log.warning("no suspects for %s -> %s: %s", change["before"], change["after"], exc)
            change["suspects"] = []
    return found
