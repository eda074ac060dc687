"""GitHub's REST API, as the bot calls it: gidgethub's sans-I/O half (headers, responses, rate
limits, an App's JWT) over httpx. Every call is logged in the store (the bot's actions). A rate
limit (403 or 429 with Retry-After, or X-RateLimit-Remaining 0) is waited out here when short,
else raised as Deferred for the task to retry later; GitHub's own faults are retried with
backoff."""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from gidgethub import BadRequest, GitHubBroken, HTTPException, sansio
from gidgethub.apps import get_jwt

from tvmrepro.errors import ReproError
from tvmrepro.settings import Settings, variable_name
from tvmrepro.store import Store

API_VERSION = "2022-11-28"
TRIES = 4
MAX_INLINE_WAIT_S = 5.0  # longer waits are the task's (retried later)
BACKOFF_S = 0.5
TIMEOUT_S = 20.0
TOKEN_MARGIN_S = 120.0  # an installation token is renewed this long before it expires


class Deferred(ReproError):
    """GitHub asked the bot to wait (a rate limit), or the issue is busy: retry later."""

    def __init__(self, seconds: float, why: str) -> None:
        super().__init__(f"{why}: retry in {seconds:.0f} s")
        self.seconds = max(1.0, seconds)


class Busy(Deferred):
    """Another follow-up holds the issue: this one is asked for again, afresh, after it (a
    retry would count against the rate limit's deferrals, and a flood's leader, asked again
    after each of its followers, may be held for longer than those allow)."""


class NotConfigured(ReproError):
    """The bot has no way to authenticate to GitHub."""


@dataclass
class Issue:
    """Where a call is about (the log's columns)."""

    repo: str | None
    number: int | None
    installation: int | None = None


def retry_delay(response: httpx.Response) -> float | None:
    """How long GitHub asks to wait before another call (None: it does not)."""
    if response.status_code not in (403, 429):
        return None
    after = response.headers.get("retry-after", "")
    if after.isdigit():
        return float(after)
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset", "")
        return max(1.0, float(reset) - time.time()) if reset.isdigit() else 60.0
    return 60.0 if response.status_code == 429 else None


@dataclass
class GitHubClient:
    """The REST calls of one process (tokens and the rate limit seen are kept per process)."""

    settings: Settings
    store: Store
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=TIMEOUT_S))
    tokens: dict[int, tuple[str, float]] = field(default_factory=dict)
    blocked_until: float = 0.0

    def call(self, method: str, path: str, issue: Issue, action: str,
             body: dict[str, Any] | None = None, once: bool = False) -> Any:
        """One call; its decoded answer. HTTPException for an answer GitHub refused. A call
        that is not safe to repeat (`once`: a new comment, which GitHub may have made before
        failing) is not made again here after a fault: the fault is raised, and the follow-up
        that retries looks for what it left first."""
        headers = self.headers(issue)
        for attempt in range(TRIES):
            self.wait(issue, action)
            try:
                response = self.http.request(method, self.url(path), headers=headers, json=body)
            except httpx.TransportError as exc:
                self.store.log_action(issue.repo, issue.number, action, f"{method} {path}: {exc}")
                if once:
                    raise
                time.sleep(BACKOFF_S * 2 ** attempt)
                continue
            delay = retry_delay(response)
            if delay is not None:
                self.limited(issue, action, delay, response.status_code)
                continue
            if response.status_code >= 500 and attempt < TRIES - 1 and not once:
                self.store.log_action(issue.repo, issue.number, action, f"{method} {path}: "
                                      "GitHub failed; retried", response.status_code)
                time.sleep(BACKOFF_S * 2 ** attempt)
                continue
            return self.decoded(response, issue, action, f"{method} {path}")
        raise Deferred(BACKOFF_S * 2 ** TRIES, f"{method} {path} did not go through")

    def decoded(self, response: httpx.Response, issue: Issue, action: str, what: str) -> Any:
        """The answer's data, the rate limit it tells kept; logged either way."""
        try:
            data, limit, _ = sansio.decipher_response(response.status_code, response.headers,
                                                      response.content)
        except HTTPException as exc:
            self.store.log_action(issue.repo, issue.number, action, f"{what}: refused: {exc}",
                                  response.status_code)
            raise
        if limit is not None and limit.remaining == 0:
            self.blocked_until = limit.reset_datetime.timestamp()
        self.store.log_action(issue.repo, issue.number, action, what, response.status_code)
        return data

    def limited(self, issue: Issue, action: str, delay: float, status: int) -> None:
        """A rate limit: waited out here when short, else Deferred."""
        self.blocked_until = time.time() + delay
        self.store.log_action(issue.repo, issue.number, "rate-limited",
                              f"{action}: GitHub asked to wait {delay:.0f} s", status)
        if delay > MAX_INLINE_WAIT_S:
            raise Deferred(delay, "GitHub's rate limit")

    def wait(self, issue: Issue, action: str) -> None:
        """Wait until the rate limit allows a call (Deferred where that is long)."""
        left = self.blocked_until - time.time()
        if left > MAX_INLINE_WAIT_S:
            raise Deferred(left, "GitHub's rate limit")
        if left > 0:
            time.sleep(left)

    def url(self, path: str) -> str:
        """The address of an API path (the bot's base URL: TVMREPRO_GITHUB_API_URL)."""
        return sansio.format_url(path, None, base_url=self.settings.github_api_url)

    def headers(self, issue: Issue) -> dict[str, str]:
        """GitHub's headers with the bot's token (an App's installation token, made here)."""
        found = sansio.create_headers(self.settings.github_bot_name, oauth_token=self.token(issue))
        return found | {"x-github-api-version": API_VERSION}

    def token(self, issue: Issue) -> str:
        """TVMREPRO_GITHUB_TOKEN, else an installation token of the App."""
        if self.settings.github_token:
            return self.settings.github_token
        if not (self.settings.github_app_id and self.settings.github_private_key):
            raise NotConfigured(f"the bot cannot call GitHub: set {variable_name('github_token')}"
                                f", or {variable_name('github_app_id')} and "
                                f"{variable_name('github_private_key')}")
        if issue.installation is None:
            raise NotConfigured("the event named no installation of the App")
        kept = self.tokens.get(issue.installation)
        if kept is None or kept[1] - TOKEN_MARGIN_S < time.time():
            kept = self.installation_token(issue)
            self.tokens[issue.installation] = kept
        return kept[0]

    def installation_token(self, issue: Issue) -> tuple[str, float]:
        """A new installation token and when it expires (the App's JWT asks for it)."""
        key = self.settings.github_private_key
        assert key is not None and self.settings.github_app_id
        jwt = get_jwt(app_id=self.settings.github_app_id, private_key=key.read_text())
        headers = sansio.create_headers(self.settings.github_bot_name, jwt=jwt)
        path = f"/app/installations/{issue.installation}/access_tokens"
        response = self.http.post(self.url(path), headers=headers)
        data = self.decoded(response, issue, "token", f"POST {path}")
        expires = calendar.timegm(time.strptime(data["expires_at"], "%Y-%m-%dT%H:%M:%SZ"))
        return str(data["token"]), expires


__all__ = ["BadRequest", "Deferred", "GitHubBroken", "GitHubClient", "HTTPException", "Issue",
           "NotConfigured", "retry_delay"]
