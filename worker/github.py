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
FAILURE_TRIES = 4  # a follow-up that fails is tried this many times in all
_clients: dict[int, GitHubClient] = {}


def client_of(app: Celery) -> GitHubClient:
    """This process's GitHub client, with a store of its own (made after the fork: no
    connection crosses one), its tokens and the rate limit it saw."""
    settings: Settings = app.conf.get("tvmrepro_settings") or Settings.from_env()
    found = _clients.get(os.getpid())
    if found is None or found.settings != settings:
        store = Store(settings.store_url, artifacts=settings.artifacts_dir)
        found = _clients[os.getpid()] = GitHubClient(settings, store)
    return found


@shared_task(name=FOLLOW_UP_TASK, bind=True, autoretry_for=(StoreAway,),
             max_retries=STORE_RETRIES, retry_backoff=True, retry_jitter=False)
def follow_up_issue(self: Task, repo: str, number: int, failures: int = 0) -> str:
    """Bring one issue's comments and labels up to date with the store. `failures`: how many
    times this follow-up failed before (it is retried with backoff, FAILURE_TRIES in all)."""
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
    except StoreAway:
        raise
    except HTTPException as exc:
        if int(exc.status_code) < 500:  # GitHub refused a call (logged with its status): the
            return f"GitHub refused: {exc}"  # next event or finished job of the issue tries again
        return failed(self, client, (repo, number), failures, exc)
    except Exception as exc:  # a fault of GitHub's or of the follow-up's own: tried again
        return failed(self, client, (repo, number), failures, exc)


def failed(task: Task, client: GitHubClient, issue: tuple[str, int], failures: int,
           exc: Exception) -> str:
    """A follow-up that failed: retried with backoff (TVMREPRO_GITHUB_RETRY_BACKOFF_S, doubled
    after each try; logged among the bot's actions), FAILURE_TRIES times in all; then given
    up, which is logged too (the next event or finished job of the issue asks again)."""
    repo, number = issue
    store = client.store
    what = f"{type(exc).__name__}: {exc}"[:500]
    tries = failures + 1
    if tries >= FAILURE_TRIES:
        log.error("follow-up of %s#%d gave up after %d tries: %s", repo, number, tries, what)
        store.log_action(repo, number, "gave up", f"the follow-up failed {tries} times; "
                         f"the last: {what}")
        return f"gave up: {what}"
    delay = client.settings.github_retry_backoff_s * 2 ** failures
    log.warning("follow-up of %s#%d failed (%s): retried in %.0f s", repo, number, what, delay)
    store.log_action(repo, number, "retry", f"the follow-up failed ({what}): try {tries + 1} "
                     f"of {FAILURE_TRIES} in {delay:.0f} s")
    raise task.retry(countdown=delay, kwargs={"failures": tries},
                     max_retries=MAX_DEFERRALS + FAILURE_TRIES) from exc


def after_run(app: Celery, store: Store, job_id: str) -> None:
    """After a run of `job_id` is stored: the follow-up of the issues watching the job (or its
    triage) that it finished. A failure is logged: the next event of the issue asks again."""
    try:
        for repo, number in finished_watchers(store, job_id):
            publish_follow_up(app, repo, number)
    except Exception:
        log.exception("asking for the follow-ups of job %s failed", job_id)
