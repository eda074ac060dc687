"""GitHubStandIn: a local stand-in of the REST endpoints the bot calls (GitHub cannot be reached
from the tests), a real HTTP server on a port of its own. It takes an App's installation-token
request only with a JWT signed by the App's key, every other call only with a token it gave,
keeps the comments, labels and states the calls leave, and can answer the next calls with a
rate limit (429 with Retry-After, or 403 with X-RateLimit-Remaining 0), as GitHub does."""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import jwt

from tests.service.stack import free_port

BOT_LOGIN = "tvm-repro[bot]"  # the App's user: every comment made through the stand-in is its
ISSUE = r"/repos/(?P<repo>[\w.-]+/[\w.-]+)/issues/(?P<number>\d+)"
ROUTES = [
    ("POST", re.compile(r"/app/installations/(?P<installation>\d+)/access_tokens"), "token"),
    ("POST", re.compile(ISSUE + "/comments"), "comment"),
    ("GET", re.compile(ISSUE + r"/comments\?per_page=(?P<per_page>\d+)&page=(?P<page>\d+)"),
     "comments"),
    ("PATCH", re.compile(r"/repos/(?P<repo>[\w.-]+/[\w.-]+)/issues/comments/(?P<id>\d+)"), "edit"),
    ("POST", re.compile(ISSUE + "/labels"), "label"),
    ("DELETE", re.compile(ISSUE + "/labels/(?P<name>[^/]+)"), "unlabel"),
    ("PATCH", re.compile(ISSUE), "issue"),
]


@dataclass
class Comment:
    """A comment the bot posted: where, its body now, and each body it had."""

    id: int
    repo: str
    number: int
    bodies: list[str]

    @property
    def body(self) -> str:
        """Its body now."""
        return self.bodies[-1]


@dataclass
class Recorded:
    """What the calls left."""

    comments: dict[int, Comment] = field(default_factory=dict)
    labels: dict[int, list[str]] = field(default_factory=dict)
    states: dict[int, str] = field(default_factory=dict)
    calls: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status


class GitHubStandIn:
    """The stand-in server; `url` is the bot's TVMREPRO_GITHUB_API_URL."""

    def __init__(self, app_id: str, public_key: str) -> None:
        self.app_id, self.public_key = app_id, public_key
        self.tokens: set[str] = set()
        self.recorded = Recorded()
        self.lock = threading.Lock()
        self.limits: list[dict[str, str]] = []  # the next answers' rate-limit headers
        # The next faults: (status, made, where) answers the next call whose "METHOD path"
        # holds `where` with `status` (a 5xx; 0: a 200 whose page is not JSON), the call done
        # first where `made`.
        self.faults: list[tuple[int, bool, str]] = []
        self.next_id = 900_000_001
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                stand_in.answer(self)

            do_PATCH = do_DELETE = do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GitHubStandIn:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def rate_limit_next(self, count: int, retry_after: int = 1) -> None:
        """Answer the next `count` calls with a rate limit: 429 with Retry-After first, then
        403 with X-RateLimit-Remaining 0 and its reset."""
        with self.lock:
            for index in range(count):
                self.limits.append({"retry-after": str(retry_after)} if index % 2 == 0 else
                                   {"x-ratelimit-remaining": "0",
                                    "x-ratelimit-reset": str(int(time.time()) + retry_after)})

    def fail_next(self, count: int, where: str, status: int = 502, made: bool = False) -> None:
        """Answer the next `count` calls whose "METHOD path" holds `where` (past any rate
        limit) with GitHub's fault `status`; `made`: the call is done all the same (a comment
        made, its answer lost); status 0: a 200 whose body is a proxy's HTML page, not JSON."""
        with self.lock:
            self.faults += [(status, made, where)] * count

    def fault(self, method: str, path: str) -> tuple[int, bool, str] | None:
        """The fault the call gets, taken off the list (None: none)."""
        with self.lock:
            if self.limits:
                return None
            found = next((f for f in self.faults if f[2] in f"{method} {path}"), None)
            if found is not None:
                self.faults.remove(found)
            return found

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        """One call: checked, recorded, answered."""
        length = int(request.headers.get("Content-Length") or 0)
        body = json.loads(request.rfile.read(length) or b"null")
        fault = self.fault(request.command, request.path)
        status, data, headers = (500, None, {}) if fault and not fault[1] else self.route(
            request.command, request.path, body, request.headers.get("Authorization", ""))
        if fault:
            status, data = fault[0] or 200, {"message": "Server Error"}
        with self.lock:
            self.recorded.calls.append((request.command, request.path, status))
        payload = json.dumps(data).encode() if data is not None else b""
        if fault and not fault[0]:
            payload, headers = b"<html><body>Unicorn!</body></html>", {
                "content-type": "text/html"}
        request.send_response(status)
        for name, value in {"content-type": "application/json; charset=utf-8",
                            "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4999",
                            "x-ratelimit-reset": str(int(time.time()) + 3600), **headers}.items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        request.wfile.write(payload)

    def route(self, method: str, path: str, body: Any, auth: str) -> tuple[int, Any, dict[str, str]]:
        """The status, answer and headers of a call."""
        with self.lock:
            if self.limits:
                headers = self.limits.pop(0)
                return (429 if "retry-after" in headers else 403), \
                    {"message": "API rate limit exceeded"}, headers
        for wanted, pattern, name in ROUTES:
            match = pattern.fullmatch(path)
            if match and wanted == method:
                refused = self.refused(name, auth)
                if refused:
                    return 401, {"message": refused}, {}
                with self.lock:
                    return getattr(self, f"on_{name}")(match.groupdict(), body)
        return 404, {"message": "Not Found"}, {}

    def refused(self, name: str, auth: str) -> str | None:
        """Why the call's credentials are refused (None: they are not)."""
        if name == "token":
            try:
                claims = jwt.decode(auth.removeprefix("bearer "), self.public_key,
                                    algorithms=["RS256"])
            except jwt.PyJWTError as exc:
                return f"A JSON web token could not be decoded: {exc}"
            return None if str(claims.get("iss")) == self.app_id else "wrong App"
        return None if auth.removeprefix("token ") in self.tokens else "Bad credentials"

    def on_token(self, match: dict[str, str], body: Any) -> tuple[int, Any, dict[str, str]]:
        token = "ghs_" + secrets.token_hex(16)
        self.tokens.add(token)
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        return 201, {"token": token, "expires_at": expires}, {}

    def on_comment(self, match: dict[str, str], body: Any) -> tuple[int, Any, dict[str, str]]:
        self.next_id += 1
        number = int(match["number"])
        self.recorded.comments[self.next_id] = Comment(self.next_id, match["repo"], number,
                                                       [body["body"]])
        return 201, {"id": self.next_id, "body": body["body"],
                     "html_url": f"https://github.com/{match['repo']}/issues/{number}"
                                 f"#issuecomment-{self.next_id}"}, {}

    def on_comments(self, match: dict[str, str], body: Any) -> tuple[int, Any, dict[str, str]]:
        number, size = int(match["number"]), int(match["per_page"])
        found = [c for c in self.recorded.comments.values()
                 if c.repo == match["repo"] and c.number == number]
        start = (int(match["page"]) - 1) * size
        return 200, [{"id": c.id, "body": c.body, "user": {"login": BOT_LOGIN, "type": "Bot"}}
                     for c in found[start:start + size]], {}

    def on_edit(self, match: dict[str, str], body: Any) -> tuple[int, Any, dict[str, str]]:
        comment = self.recorded.comments.get(int(match["id"]))
        if comment is None:
            return 404, {"message": "Not Found"}, {}
        comment.bodies.append(body["body"])
        return 200, {"id": comment.id, "body": comment.body}, {}

    def on_label(self, match: dict[str, str], body: Any) -> tuple[int, Any, dict[str, str]]:
        labels = self.recorded.labels.setdefault(int(match["number"]), [])
        labels += [name for name in body["labels"] if name not in labels]
        return 200, [{"name": name} for name in labels], {}

    def on_unlabel(self, match: dict[str, str], body: Any) -> tuple[int, Any, dict[str, str]]:
        labels = self.recorded.labels.setdefault(int(match["number"]), [])
        name = unquote(match["name"])
        if name not in labels:
            return 404, {"message": "Label does not exist"}, {}
        labels.remove(name)
        return 200, [{"name": label} for label in labels], {}

    def on_issue(self, match: dict[str, str], body: Any) -> tuple[int, Any, dict[str, str]]:
        self.recorded.states[int(match["number"])] = str(body.get("state"))
        return 200, {"number": int(match["number"]), "state": body.get("state")}, {}

    def comments_on(self, number: int) -> list[Comment]:
        """The bot's comments on an issue, oldest first."""
        with self.lock:
            return [c for c in self.recorded.comments.values() if c.number == number]

    def labels_of(self, number: int) -> set[str]:
        """An issue's labels now."""
        with self.lock:
            return set(self.recorded.labels.get(number, []))
