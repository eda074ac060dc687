"""Job views of given run statuses over the CPU releases, as the report reads them."""

from __future__ import annotations

from tvmrepro.api.views import (
    Cell,
    Comparison,
    JobView,
    Matrix,
    RunView,
)
from tvmrepro.environments import default_catalog
from tvmrepro.lifecycle import JobStatus, RunState

ENVS = [e.id for e in default_catalog().spanning("cpu")]


def job_of(statuses: dict[str, list[str]], comparisons: list[Comparison] | None = None) -> JobView:
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
