"""Real release transitions (real_transitions.json) and their suspects, ranked with the
commit index of tvmrepro/data; the true PRs' ranks and the rates over all of them
(bench/suspect_ranks.py prints them, test_suspects_rates.py holds them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import HISTORY_INDEX, REPO
from tvmrepro.history import IndexHistory
from tvmrepro.jobs.bisect.windows import annotate

INDEX = HISTORY_INDEX


STORED = json.loads((Path(__file__).parent / "real_transitions.json").read_text())


def bisected(stored: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A bisect object with the stored transition, and each side's first run."""
    found = {"variant": stored["variant"], "oracle": stored["oracle"], "transitions": [
        {"before": stored["before"], "after": stored["after"], "from": stored["from"],
         "to": stored["to"], "candidates": []}]}
    runs = {env: {"status": "ok", "tvm": {"commit": STORED["commits"][env]}}
            for env in (stored["before"], stored["after"])}
    if stored.get("other"):  # the side that is not failing, where it fails too (reworded)
        runs[stored["other"]["environment"]] |= stored["other"]
    if stored["failing"] is not None:
        runs[stored["failing"]["environment"]] = stored["failing"]
    return found, runs


def case_of(stored: dict[str, Any]) -> dict[str, Any]:
    """The transition's case as a case file holds it: a case.json, or a script (report.py)."""
    folder = REPO / "tests" / "cases" / stored["case"]
    if (folder / "case.json").is_file():
        case: dict[str, Any] = json.loads((folder / "case.json").read_text())
        return case
    script = next(folder / name for name in ("report.py", "original.py")
                  if (folder / name).is_file())
    return {"title": stored["case"], "script": script.read_text()}


def suspects_of(stored: dict[str, Any]) -> dict[str, Any]:
    """The transition as `annotate` leaves it, with the shipped index as the history."""
    found, runs = bisected(stored)
    annotate(found, runs.get, case_of(stored), IndexHistory(INDEX))
    change: dict[str, Any] = found["transitions"][0]
    return change


def true_rank(change: dict[str, Any], prs: list[int]) -> int | None:
    """The best rank (1-based) of any of the true PRs among the suspects."""
    ranks = [n for n, s in enumerate(change["suspects"], 1) if s["pr"] in prs]
    return min(ranks) if ranks else None


@dataclass(frozen=True)
class Ranked:
    """One stored transition's outcome: the true PRs' ranks and the suspects ahead of them."""

    stored: dict[str, Any]
    ranks: dict[int, int | None]  # each true PR -> its rank (None: not among the suspects)
    suspects: list[dict[str, Any]]

    @property
    def best(self) -> int | None:
        """The best rank of any true PR."""
        found = [r for r in self.ranks.values() if r is not None]
        return min(found) if found else None


def ranked_all() -> list[Ranked]:
    """Every stored transition, ranked."""
    found = []
    for stored in STORED["transitions"]:
        change = suspects_of(stored)
        ranks = {pr: true_rank(change, [pr]) for pr in stored["true_prs"]}
        found.append(Ranked(stored, ranks, change["suspects"]))
    return found


def rates(ranked: list[Ranked]) -> tuple[int, int, int]:
    """(transitions whose true PR is first, in the top three, all transitions)."""
    return (sum(1 for r in ranked if r.best == 1),
            sum(1 for r in ranked if r.best is not None and r.best <= 3), len(ranked))
