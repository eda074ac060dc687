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

from tvmrepro.results import Result
from tvmrepro.store import Store

JOB_IR_NOT_KEPT = ("# (IR not stored: the job that ran this had stored {cap} characters of IR "
                   "of its runs, its cap (TVMREPRO_JOB_IR_CAP))\n")


def within_job_ir_cap(store: Store, job_id: str, result: Result, cap: int) -> Result:
    """`result`, or, when its IR would take the job's past `cap` characters, the same result
    with each pass's IR replaced by JOB_IR_NOT_KEPT."""
    ir = sum(len(record.ir) for record in result.passes)
    if ir == 0 or store.job_ir_chars(job_id) + ir <= cap:
        return result
    marker = JOB_IR_NOT_KEPT.format(cap=cap)
    return result.model_copy(update={"passes": [record.model_copy(update={"ir": marker})
                                                for record in result.passes]})
