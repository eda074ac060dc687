"""The follow-up of an issue: what the store says of it (its checks' triages, its commands'
jobs) made into its comments and labels on GitHub. Idempotent: it compares what it would post
with what it posted, and calls GitHub only for a difference, so a follow-up asked twice (two
finishers, a retry) does nothing the second time. One at a time per issue (a lease), and each
thing it did saved at once, so a follow-up cut short by a rate limit posts no comment twice."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from gidgethub import BadRequest

from tvmrepro.bot.checks import is_bot_label, labels_of, read_check
from tvmrepro.bot.client import Busy, GitHubClient, Issue
from tvmrepro.bot.outcomes import command_lines
from tvmrepro.bot.render import (
    confirm_body,
    error_body,
    follower_body,
    status_body,
    tracking_body,
)
from tvmrepro.bot.state import BotState, Inbox, count_check, wants_confirmation
from tvmrepro.environments import Catalog, default_catalog
from tvmrepro.settings import Settings
from tvmrepro.store import Store

LEASE_S = 300.0  # past a follow-up's longest (its rate-limit waits are bounded and short)
BUSY_RETRY_S = 2.0
MAX_COMMENT_PAGES = 10  # of 100 comments: where a failed post's comment is looked for


@dataclass
class FollowUp:
    """What a follow-up has at hand: the store, the settings, GitHub, and how to ask for
    another issue's follow-up (a flood's first report, when a report joins it)."""

    store: Store
    settings: Settings
    client: GitHubClient
    again: Callable[[str, int], None]
    catalog: Catalog | None = None

    @property
    def tracker(self) -> str:
        """The tracker's address (links to issues and comments)."""
        return self.settings.tracker_url


@dataclass
class Current:
    """One issue as this follow-up sees it."""

    inbox: Inbox
    state: BotState
    issue: Issue

    @property
    def path(self) -> str:
        """The issue's REST path."""
        return f"/repos/{self.inbox.repo}/issues/{self.inbox.number}"


def follow_up(ctx: FollowUp, repo: str, number: int) -> str:
    """Bring one issue up to date; what it did. Busy when another holds the issue."""
    token = uuid.uuid4().hex
    if not ctx.store.lease_bot_issue(repo, number, token, LEASE_S):
        raise Busy(BUSY_RETRY_S, f"{repo}#{number} is being followed up")
    try:
        return _follow(ctx, repo, number)
    finally:
        ctx.store.release_bot_issue(repo, number, token)


def _follow(ctx: FollowUp, repo: str, number: int) -> str:
    found = ctx.store.bot_issue(repo, number)
    if found is None:
        return "not an issue the bot took"
    inbox = Inbox.model_validate(found[0])
    now = Current(inbox, BotState.model_validate(found[1] or {}),
                  Issue(repo, number, inbox.installation))
    for step in (count_checks, answer_report, set_labels, ask_confirmation, answer_commands,
                 close_if_asked):
        step(ctx, now)
    return f"followed up: {len(now.state.counted)} check(s), labels {now.state.labels}"


def save(ctx: FollowUp, now: Current, **update: object) -> None:
    """Change the state and keep it at once."""
    now.state = now.state.model_copy(update=update)
    ctx.store.save_bot_state(now.inbox.repo, now.inbox.number, now.state.model_dump(mode="json"))


def count_checks(ctx: FollowUp, now: Current) -> None:
    """Count the checks whose triages finished, in order (a later one waits for an earlier)."""
    counted = {check.job for check in now.state.counted}
    for job_id in now.inbox.checks:
        if job_id in counted:
            continue
        check = read_check(ctx.store, job_id, now.inbox.number)
        if check is None:
            return
        now.state = count_check(now.state, check)
        leader = flood_leader(ctx, now, check.signature)
        save(ctx, now, leader=leader if leader != now.inbox.number else None)


def flood_leader(ctx: FollowUp, now: Current, signature: str | None) -> int | None:
    """The report of the flood that answers this signature (None: a report without one)."""
    if signature is None:
        return None
    digest = hashlib.sha256(signature.encode("utf-8", "surrogatepass")).hexdigest()
    return ctx.store.flood_leader(now.inbox.repo, digest, now.inbox.number,
                                  ctx.settings.github_flood_window_s)


def followers(ctx: FollowUp, now: Current) -> list[int]:
    """The reports answered in this one's comment (a flood's later reports)."""
    return [number for number, _, state in ctx.store.bot_issues(now.inbox.repo)
            if state.get("leader") == now.inbox.number]


def report_body(ctx: FollowUp, now: Current) -> str | None:
    """What the tracking comment says now (None: nothing to say yet)."""
    check = now.state.latest
    if check is None:
        return error_body(now.inbox.check_error) if now.inbox.check_error else None
    leader = now.state.leader
    if leader is not None:
        other = ctx.store.bot_issue(now.inbox.repo, leader)
        comment = BotState.model_validate(other[1] or {}).tracking_comment if other else None
        return follower_body(leader, comment, check, ctx.tracker)
    return tracking_body(check, now.inbox, now.state, followers(ctx, now),
                         ctx.settings.public_url)


def answer_report(ctx: FollowUp, now: Current) -> None:
    """Post the tracking comment, or edit it (never a second one)."""
    body = report_body(ctx, now)
    if body is None or body == now.state.tracking_body:
        return
    comment = post_or_edit(ctx, now, now.state.tracking_comment, body, "report")
    save(ctx, now, tracking_comment=comment, tracking_body=body)
    if now.state.leader is not None:  # the first report lists this one
        ctx.again(now.inbox.repo, now.state.leader)


def post_or_edit(ctx: FollowUp, now: Current, comment: int | None, body: str,
                 what: str) -> int:
    """Edit the comment, or post it where there is none (or it was deleted); its id. A post
    is marked before it is made and the mark taken off with the id it gave (saved by the
    caller): a post that failed, and may have made the comment anyway, is found by its mark on
    the issue and edited, never posted twice."""
    mark = body.split("\n", 1)[0]
    if comment is None and mark in now.state.posting:
        comment = own_comment(ctx, now, mark)
    if comment is not None and edited(ctx, now, comment, body, what):
        now.state = now.state.model_copy(update={
            "posting": [m for m in now.state.posting if m != mark]})
        return comment
    save(ctx, now, posting=[*dict.fromkeys([*now.state.posting, mark])])
    data = ctx.client.call("POST", f"{now.path}/comments", now.issue, f"comment {what}",
                           {"body": body}, once=True)
    now.state = now.state.model_copy(update={
        "posting": [m for m in now.state.posting if m != mark]})
    return int(data["id"])


def edited(ctx: FollowUp, now: Current, comment: int, body: str, what: str) -> bool:
    """Edit a comment of the bot's; False where it is gone (deleted)."""
    try:
        ctx.client.call("PATCH", f"/repos/{now.inbox.repo}/issues/comments/{comment}",
                        now.issue, f"edit {what}", {"body": body})
    except BadRequest as exc:
        if exc.status_code != 404:
            raise
        return False
    return True


def own_comment(ctx: FollowUp, now: Current, mark: str) -> int | None:
    """The newest comment of the bot's on the issue that starts with `mark` (None: none)."""
    bot = ctx.settings.github_bot_name.lower()
    found = None
    for page in range(1, MAX_COMMENT_PAGES + 1):
        comments = ctx.client.call("GET", f"{now.path}/comments?per_page=100&page={page}",
                                   now.issue, "look for a comment")
        for comment in comments if isinstance(comments, list) else []:
            login = str((comment.get("user") or {}).get("login") or "").lower()
            if login in (bot, f"{bot}[bot]") and str(comment.get("body") or "").startswith(mark):
                found = int(comment["id"])
        if not isinstance(comments, list) or len(comments) < 100:
            break
    return found


def set_labels(ctx: FollowUp, now: Current) -> None:
    """The labels the latest check gives: add the missing, remove the bot's others."""
    catalog = ctx.catalog or default_catalog()
    wanted = labels_of(now.state.latest, not now.inbox.not_duplicate, catalog)
    adding = [name for name in wanted if name not in now.state.labels]
    if adding:
        ctx.client.call("POST", f"{now.path}/labels", now.issue, "label", {"labels": adding})
    for name in [name for name in now.state.labels if name not in wanted and is_bot_label(name)]:
        try:
            ctx.client.call("DELETE", f"{now.path}/labels/{quote(name, safe='')}", now.issue,
                            "unlabel")
        except BadRequest as exc:
            if exc.status_code != 404:  # removed by someone already
                raise
    if wanted != now.state.labels:
        save(ctx, now, labels=wanted)


def ask_confirmation(ctx: FollowUp, now: Current) -> None:
    """After N passing checks, ask the author and assignees to confirm the fix (once)."""
    needed = ctx.settings.github_fixed_sweeps
    if now.state.leader is not None or not wants_confirmation(now.state, needed):
        return
    body = confirm_body(now.inbox, now.state, needed, ctx.settings.public_url,
                        ctx.settings.github_bot_name)
    comment = post_or_edit(ctx, now, None, body, "confirmation request")
    save(ctx, now, confirm_comment=comment, confirm_body=body)


def answer_commands(ctx: FollowUp, now: Current) -> None:
    """The status comment: each command asked, with its job and where it stands."""
    if not now.inbox.commands:
        return
    body = status_body(command_lines(ctx.store, now.inbox.commands, ctx.settings.public_url))
    if body == now.state.status_body:
        return
    comment = post_or_edit(ctx, now, now.state.status_comment, body, "status")
    save(ctx, now, status_comment=comment, status_body=body)


def close_if_asked(ctx: FollowUp, now: Current) -> None:
    """Close the issue where a maintainer's command asked it (nothing else closes one)."""
    if now.inbox.close_by is None or now.state.closed:
        return
    ctx.client.call("PATCH", now.path, now.issue, "close",
                    {"state": "closed", "state_reason": "completed"})
    save(ctx, now, closed=True)
