"""The GitHub bot's task: an issue's follow-up (tvmrepro.bot.followup) in a worker's pool
process, and the check, after each stored run, of whether that finished a job the bot watches.
A rate limit or a busy issue makes the task retry later (Celery's countdown), not wait here."""

from __future__ import annotations

import logging
import os
from functools import partial

from celery import Celery, Task, shared_task
from gidgethub import HTTPException

from tvmrepro.bot import FOLLOW_UP_TASK
from tvmrepro.bot.client import Busy, Deferred, GitHubClient, NotConfigured
from tvmrepro.bot.followup import FollowUp, follow_up
from tvmrepro.bot.watch import finished_watchers, publish_follow_up
from tvmrepro.settings import Settings
from tvmrepro.store import Store, StoreAway

log = logging.getLogger(__name__)
STORE_RETRIES = 5  # a store that is briefly away (restart, failover) is waited for
MAX_DEFERRALS = 50  # a rate limit an hour long, retried about every minute or two
_clients: dict[int, GitHubClient] = {}


def client_of(app: Celery) -> GitHubClient:
    """This process's GitHub client, with a store of its own (made after the fork: no
    connection crosses one), its tokens and the rate limit it saw."""
    settings: Settings = app.conf.get("tvmrepro_settings") or Settings.from_env()
    found = _clients.get(os.getpid())
    if found is None or found.settings != settings:
        found = _clients[os.getpid()] = GitHubClient(settings, Store(settings.store_url))
    return found


@shared_task(name=FOLLOW_UP_TASK, bind=True, autoretry_for=(StoreAway,),
             max_retries=STORE_RETRIES, retry_backoff=True, retry_jitter=False)
def follow_up_issue(self: Task, repo: str, number: int) -> str:
    """Bring one issue's comments and labels up to date with the store."""
    client = client_of(self.app)
    work = FollowUp(client.store, client.settings, client, partial(publish_follow_up, self.app))
    try:
        return follow_up(work, repo, number)
    except Busy as exc:
        publish_follow_up(self.app, repo, number, exc.seconds)
        return f"busy: asked again in {exc.seconds:.0f} s"
    except Deferred as exc:
        log.info("follow-up of %s#%d deferred: %s", repo, number, exc)
        raise self.retry(countdown=exc.seconds, max_retries=MAX_DEFERRALS) from exc
    except NotConfigured as exc:
        client.store.log_action(repo, number, "refused", f"not configured: {exc}")
        return f"not configured: {exc}"
    except HTTPException as exc:  # GitHub refused a call (logged with its status): the next
        return f"GitHub refused: {exc}"  # event or finished job of the issue tries again


def after_run(app: Celery, store: Store, job_id: str) -> None:
    """After a run of `job_id` is stored: the follow-up of the issues watching the job (or its
    triage) that it finished. A failure is logged: the next event of the issue asks again."""
    try:
        for repo, number in finished_watchers(store, job_id):
            publish_follow_up(app, repo, number)
    except Exception:
        log.exception("asking for the follow-ups of job %s failed", job_id)
