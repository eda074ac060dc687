"""The run task executed in this process, as a worker executes it (no worker process)."""

from __future__ import annotations

from celery import Celery

from tvmrepro.queue import RUN_TASK


def run_task(app: Celery, run_id: str) -> str:
    """Execute the task in this process, as a worker would."""
    import worker.tasks  # noqa: F401  # registers the task with the app

    outcome: str = app.tasks[RUN_TASK].apply(args=[run_id]).get()
    return outcome
