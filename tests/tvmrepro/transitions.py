"""Real release transitions (real_transitions.json) and their suspects, ranked with the
commit index of tvmrepro/data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import HISTORY_INDEX, REPO
from tvmrepro.history import IndexHistory
from tvmrepro.jobs.bisect.windows import annotate

INDEX = HISTORY_INDEX


STORED = json.loads((Path(__file__).parent / "real_transitions.json").read_text())


def bisected(stored: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A bisect object with the stored transition, and each side's first run."""
    found = {"variant": stored["variant"], "transitions": [
        {"before": stored["before"], "after": stored["after"], "from": stored["from"],
         "to": stored["to"], "candidates": []}]}
    runs = {env: {"status": "ok", "tvm": {"commit": STORED["commits"][env]}}
            for env in (stored["before"], stored["after"])}
    if stored["failing"] is not None:
        runs[stored["failing"]["environment"]] = stored["failing"]
    return found, runs


def suspects_of(stored: dict[str, Any]) -> dict[str, Any]:
    """The transition as `annotate` leaves it, with the shipped index as the history."""
    found, runs = bisected(stored)
    case = json.loads((REPO / "tests" / "cases" / stored["case"] / "case.json").read_text())
    annotate(found, runs.get, case, IndexHistory(INDEX))
    change: dict[str, Any] = found["transitions"][0]
    return change
