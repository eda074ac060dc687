"""The GitHub bot's endpoints (docs/bot.md): the App's webhook, the log of the bot's actions,
and a sweep of the issues it answers.

A delivery is taken only with GitHub's signature of its exact bytes under the App's secret
(HMAC-SHA256 in X-Hub-Signature-256, compared in constant time by gidgethub's sans-I/O half),
and only once: its X-GitHub-Delivery id is kept, and a second delivery with it is a replay,
refused. The answer comes at once (202); what it asks is done by jobs of the service and the
issue's follow-up on a worker (tvmrepro/bot/).
"""

from __future__ import annotations

import logging

from flask import Blueprint, Request, Response, request
from gidgethub import BadRequest, ValidationFailure, sansio

from service.api import answer, error, service
from service.clients import maintainer_bearer
from service.query_args import int_arg
from tvmrepro.api.bot import BotAction, BotActionList, BotSweep, WebhookTaken
from tvmrepro.api.requests import JobRequest
from tvmrepro.api.views import JobView
from tvmrepro.bot.intake import Desk, receive, sweep, tracked_repo
from tvmrepro.bot.watch import publish_follow_up
from tvmrepro.errors import BadInput, Forbidden
from tvmrepro.settings import variable_name
from tvmrepro.submitters import MAINTAINER, Admission

log = logging.getLogger(__name__)
SIGNATURE = "X-Hub-Signature-256"
DELIVERY = "X-GitHub-Delivery"
EVENT = "X-GitHub-Event"
MAX_DELIVERY_ID = 64
DEFAULT_ACTIONS, MAX_ACTIONS = 50, 500
# The bot's jobs are the deployment's own: no submitter's budget (the queue's cap holds).
BOT = Admission(MAINTAINER, None)

github = Blueprint("github", __name__, url_prefix="/api/v1/github")


def desk() -> Desk:
    """What the bot's intake has at hand in this API process."""
    jobs = service()

    def follow(repo: str, number: int) -> None:
        try:
            publish_follow_up(jobs.celery, repo, number)
        except Exception:  # the next event or finished job of the issue asks again
            log.exception("asking for the follow-up of %s#%d failed", repo, number)

    def finished(job_id: str) -> bool:
        view = jobs.job(job_id)
        return view is not None and view.status.finished

    def start(job: JobRequest) -> JobView:
        return jobs.start(job, BOT)

    return Desk(jobs.settings, jobs.store, jobs.catalog, start, finished, follow)


def refused(status: int, message: str, header: str) -> tuple[Response, int]:
    """A delivery refused, logged among the bot's actions."""
    service().store.log_action(None, None, "refused", f"{header}: {message}", status)
    return error(status, message, header)


def signed(req: Request, body: bytes, secret: str) -> tuple[Response, int] | None:
    """None where the body carries the App's signature, else the refusal."""
    signature = req.headers.get(SIGNATURE, "")
    if not signature.startswith("sha256="):
        return refused(401, f"a delivery carries GitHub's signature in {SIGNATURE} "
                            "(sha256=...)", SIGNATURE)
    try:
        sansio.validate_event(body, signature=signature, secret=secret)
    except ValidationFailure:
        return refused(401, "the signature is not of this body under the App's webhook "
                            "secret", SIGNATURE)
    return None


@github.post("/webhook")
def webhook() -> tuple[Response, int]:
    """A delivery of the App's webhook: checked, taken once, answered at once."""
    secret = service().settings.github_webhook_secret
    if not secret:
        return error(404, f"the GitHub bot is not set up here: "
                          f"{variable_name('github_webhook_secret')} is unset")
    body = request.get_data()
    refusal = signed(request, body, secret)
    if refusal is not None:
        return refusal
    delivery, event = request.headers.get(DELIVERY, ""), request.headers.get(EVENT, "")
    if not delivery or len(delivery) > MAX_DELIVERY_ID or not event:
        raise BadInput(DELIVERY if not delivery or len(delivery) > MAX_DELIVERY_ID else EVENT,
                       "missing, or longer than 64 characters")
    headers = {name.lower(): value for name, value in request.headers.items()}
    try:
        parsed = sansio.Event.from_http(headers, body, secret=secret)
    except BadRequest as exc:
        return error(int(exc.status_code), str(exc), "Content-Type")
    action = parsed.data.get("action") if isinstance(parsed.data, dict) else None
    if not service().store.take_delivery(delivery, event, str(action) if action else None):
        return refused(409, f"delivery {delivery!r} was taken before: a replay is refused",
                       DELIVERY)
    outcome = receive(desk(), event, parsed.data)
    return answer(WebhookTaken(delivery=delivery, event=event, action=action, outcome=outcome),
                  202)


@github.get("/actions")
def actions() -> tuple[Response, int]:
    """The bot's actions, newest first (?limit=, ?offset=)."""
    limit = int_arg("limit", DEFAULT_ACTIONS, 1, MAX_ACTIONS)
    offset = int_arg("offset", 0, 0, 10 ** 9)
    rows, total = service().store.actions(limit, offset)
    more = offset + len(rows) < total
    return answer(BotActionList(actions=[BotAction.model_validate(row) for row in rows],
                                total=total, next_offset=offset + len(rows) if more else None))


@github.post("/sweep")
def sweep_issues() -> tuple[Response, int]:
    """Check every open issue the bot answers again (the maintainer's only): one triage."""
    if not maintainer_bearer(request, service().settings):
        raise Forbidden("a sweep of the bot's issues is the maintainer's: send "
                        f"Authorization: Bearer ${variable_name('maintainer_token')}",
                        "Authorization")
    job, numbers = sweep(desk(), tracked_repo(service().settings))
    return answer(BotSweep(job=job, issues=numbers), 202)
