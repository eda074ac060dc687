"""The report's own logic on constructed jobs: the conclusion, one diff where diffs agree."""

from __future__ import annotations

from typing import Any

from tvmrepro.environments import default_catalog
from tvmrepro.lifecycle import JobStatus, RunState
from tvmrepro.models import Cell, CellRef, Comparison, JobView, Matrix, PassStep, RunView
from tvmrepro.report import render_report

ENVS = [e.id for e in default_catalog().spanning("cpu")]


def _job(statuses: dict[str, list[str]], comparisons: list[Comparison] | None = None) -> JobView:
    variants = list(statuses)
    cells = [[Cell(variant=v, environment=e, run=f"{v}@{e}", state=RunState.DONE, status=s)
              for e, s in zip(ENVS, statuses[v], strict=True)] for v in variants]
    runs = [RunView(id=c.run, variant=c.variant, environment=c.environment, state=RunState.DONE,
                    cached=False, deliveries=1, result={"status": c.status})
            for row in cells for c in row]
    return JobView(id="j", kind="run", title="t", status=JobStatus.DONE, created_at="now",
                   environments=ENVS, variants=variants, bypass_cache=False, cached_runs=0,
                   runs=runs, matrix=Matrix(variants=variants, environments=ENVS, cells=cells,
                                            groups=[], comparisons=comparisons or []),
                   case={"source": "x = 1\n"})


def _comparison(env: str, body: str) -> Comparison:
    return Comparison(a=CellRef(variant="a", environment=env),
                      b=CellRef(variant="b", environment=env), identical=False,
                      first_differing_pass=PassStep(index=1, a="P", b="Q"),
                      diff=f"--- a@{env} after pass 1\n+++ b@{env} after pass 1\n{body}")


def test_the_first_line_concludes() -> None:
    first = render_report(_job({"a": ["error"] * 3, "b": ["ok", "error", "ok"]})).splitlines()[0]
    releases: list[Any] = [default_catalog().get(e).release for e in ENVS]
    assert first == (f"**`a` fails (error) on every tested release ({releases[0]} → "
                     f"{releases[-1]}, 3 release(s)); `b` fails on {releases[1]} and passes on "
                     f"{releases[0]}, {releases[2]}.**")


def test_a_diff_that_is_the_same_everywhere_is_shown_once() -> None:
    same = [_comparison(e, "-x\n+y") for e in ENVS]
    text = render_report(_job({"a": ["error"] * 3, "b": ["ok"] * 3}, same))
    assert text.count("```diff") == 1
    assert "first differ after step 2: `P` in `a`, `Q` in `b`" in text
    other = same[:2] + [_comparison(ENVS[2], "-x\n+z")]
    assert render_report(_job({"a": ["error"] * 3, "b": ["ok"] * 3}, other)).count("```diff") == 2


def test_reproduced_only_when_something_failed() -> None:
    assert "Reproduced with" in render_report(_job({"a": ["error", "ok", "ok"]}))
    assert "Reproduced" not in render_report(_job({"a": ["ok"] * 3}))
