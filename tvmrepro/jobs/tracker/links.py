"""Links to the tracker (TVMREPRO_TRACKER_URL, default apache/tvm on GitHub): the only place a
triage's reports and the known issues link to. A report's own address elsewhere (another host,
another repository, credentials in it) is dropped as it is submitted, and a known issue's link
is made from its number, never taken from a report."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# What follows the tracker's address in an issue's own: issues/N or pull/N, an anchor at most.
_ISSUE_PATH = re.compile(r"/(?:issues|pull)/\d{1,9}(?:#[\w-]*)?")


def on_tracker(url: str | None, tracker: str) -> bool:
    """Whether `url` is an issue's (or pull request's) address on the tracker."""
    if not url or not url.startswith(tracker + "/"):
        return False
    parts = urlsplit(url)
    home = urlsplit(tracker)
    # The prefix alone would let "https://github.com/apache/tvm.evil/..." or an "@host" pass.
    return ((parts.scheme, parts.netloc) == (home.scheme, home.netloc) and not parts.query
            and _ISSUE_PATH.fullmatch(url[len(tracker):]) is not None)


def tracker_link(url: str | None, tracker: str) -> str | None:
    """`url` where it is on the tracker, else None (no link)."""
    return url if on_tracker(url, tracker) else None


def issue_url(tracker: str, number: int) -> str:
    """The address of issue `number` on the tracker (GitHub's, GitLab's and Gitea's form)."""
    return f"{tracker}/issues/{number}"
