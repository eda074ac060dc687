"""Which issues to follow up once a run is stored: those watching its job (or the triage its job
is a part of), once that job is finished. Asked by the worker after every run, so it costs one
indexed read for a job nobody watches."""

from __future__ import annotations

from celery import Celery

from tvmrepro.bot import FOLLOW_UP_TASK
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.queue import PUBLISH_RETRY, SETTLE_QUEUE
from tvmrepro.store import Store


def finished_watchers(store: Store, job_id: str) -> list[tuple[str, int]]:
    """The issues (repo, number) watching the job, or its triage, where that just finished."""
    watchers = store.watchers(job_id)
    root: str | None = job_id
    if not watchers:
        root = store.triage_of(job_id)
        watchers = store.watchers(root) if root else []
    job = store.job(root) if watchers and root else None
    if job is None or not KINDS[job.kind].read(store, job).status.finished:
        return []
    return watchers


def publish_follow_up(app: Celery, repo: str, number: int, countdown: float | None = None) -> None:
    """Ask a worker's pool process for an issue's follow-up (on the queue every worker
    consumes), now or `countdown` seconds from now."""
    app.send_task(FOLLOW_UP_TASK, args=[repo, number], queue=SETTLE_QUEUE, retry=True,
                  retry_policy=PUBLISH_RETRY, countdown=countdown)
