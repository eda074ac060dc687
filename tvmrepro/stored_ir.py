"""What one job may store of its runs' IR, over all its runs.

A run's own IR is capped by the worker (worker/runner.py, RUN_IR_CAP); a job of many runs
could still store that many times over (a 500-run job: about 4 GiB). Before a run's result is
stored, its IR is measured against what the job's runs stored already: past the job's cap
(`Settings.job_ir_cap`, TVMREPRO_JOB_IR_CAP) the run's result is kept whole but for its IR,
each pass's replaced by a marker saying why. Runs of one job finishing at the same moment
each see the others' IR not yet stored: the cap may be passed by their own IR, at most
RUN_IR_CAP each.
"""

from __future__ import annotations

import sqlalchemy as sa

from tvmrepro import schema as t
from tvmrepro.results import Result
from tvmrepro.store import Store

JOB_IR_NOT_KEPT = ("# (IR not stored: the job that ran this had stored {cap} characters of IR "
                   "of its runs, its cap (TVMREPRO_JOB_IR_CAP))\n")


def job_ir_chars(store: Store, job_id: str) -> int:
    """Characters of IR stored for the job's own runs (a cached run's IR is its first job's)."""
    own_runs = sa.select(t.runs.c.id).where(t.runs.c.job_id == job_id)
    query = sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(t.pass_ir.c.ir)), 0)).where(
        t.pass_ir.c.run_id.in_(own_runs))
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def within_job_ir_cap(store: Store, job_id: str, result: Result, cap: int) -> Result:
    """`result`, or, when its IR would take the job's past `cap` characters, the same result
    with each pass's IR replaced by JOB_IR_NOT_KEPT."""
    ir = sum(len(record.ir) for record in result.passes)
    if ir == 0 or job_ir_chars(store, job_id) + ir <= cap:
        return result
    marker = JOB_IR_NOT_KEPT.format(cap=cap)
    return result.model_copy(update={"passes": [record.model_copy(update={"ir": marker})
                                                for record in result.passes]})
