"""After a run of a triage's run job is stored: a triage whose runs are all done keeps the
signatures of the issues it saw fail (known issues: a job failing with one names the issue)."""

from __future__ import annotations

import logging

from tvmrepro.store import Store
from tvmrepro.triage_jobs import record_finished_triage

log = logging.getLogger(__name__)


def after_triage_run(store: Store, job_id: str) -> None:
    """Record the known issues of the triage that job_id's run finished, if it did."""
    try:
        record_finished_triage(store, job_id)
    except Exception:
        # The runs are stored and the answer is read from them; only its known issues wait
        # for the next triage of these reports.
        log.exception("recording the known issues of the triage of job %s failed", job_id)
