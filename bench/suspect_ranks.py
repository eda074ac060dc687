"""How well suspects find the PR behind a real change: the rank of each true PR on every stored
real transition (tests/tvmrepro/real_transitions.json, ranked with the shipped commit index),
and the share of transitions whose true PR is first and in the top three.

A ratio, not a time: no TVM runs, the stored failing runs and the index are all it reads.

    .venv/bin/python bench/suspect_ranks.py [--json] [--top N]

`--top N` lists the first N suspects of each transition (with their scores) under its row.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.tvmrepro.transitions import Ranked, ranked_all, rates  # noqa: E402


def row(ranked: Ranked) -> str:
    """One transition as a table row."""
    stored = ranked.stored
    direction = "regression" if stored["to"] == "bad" else "fix"
    prs = ", ".join(f"#{pr}: {rank if rank is not None else '-'}"
                    for pr, rank in ranked.ranks.items())
    before, after = (stored[k].removeprefix("tvm-").removesuffix("-cpu")
                     for k in ("before", "after"))
    return f"| {stored['case']} | {before} -> {after} ({direction}) | {prs} | " \
           f"{ranked.best if ranked.best is not None else '-'} |"


def main() -> int:
    """Print the table and the rates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object instead")
    parser.add_argument("--top", type=int, default=0, help="list this many suspects each")
    args = parser.parse_args()
    ranked = ranked_all()
    first, top3, total = rates(ranked)
    if args.json:
        print(json.dumps({"transitions": [
            {"case": r.stored["case"], "before": r.stored["before"], "after": r.stored["after"],
             "ranks": {str(pr): rank for pr, rank in r.ranks.items()}, "best": r.best}
            for r in ranked], "top1": [first, total], "top3": [top3, total]}, indent=2))
        return 0
    print("| case | transition | true PR: rank | best |")
    print("| --- | --- | --- | --- |")
    for found in ranked:
        print(row(found))
    for found in ranked if args.top else []:
        print(f"\n{found.stored['case']} -> {found.stored['after']}:")
        for n, suspect in enumerate(found.suspects[:args.top], 1):
            print(f"  {n}. #{suspect['pr']} {suspect['score']:.3f} {suspect['subject'][:80]}")
    print(f"\ntop-1: {first}/{total} ({first / total:.0%})   "
          f"top-3: {top3}/{total} ({top3 / total:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
