"""Which issue one issue's text is: its number, title, state, address and repository, read
from (in this order) the header `gh issue view` prints when its output is not a terminal, the
text's `# title` heading, the issue's own address or `owner/repo#N` opening a line of its
prose, and last the file's name. Each field comes from the first of these that gives it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tvmrepro.errors import BadInput
from tvmrepro.jobs.bounded import bounded
from tvmrepro.jobs.tracker.markdown import outside_blocks

# Where each field came from, as `import --json` shows it (`identity`).
FROM_GH, FROM_HEADING, FROM_TEXT, FROM_FILE_NAME = "gh issue view", "heading", "text", "file name"
STATES = ("OPEN", "CLOSED")

# `gh issue view N` without a terminal (cli/cli, printRawIssuePreview): "title:\t...",
# "state:\tOPEN", "author:", "labels:", "comments:", "assignees:", "projects:", "milestone:",
# "number:\t17357" (newer releases), then a line "--" and the body. A copy from a terminal may
# have spaces for its tabs.
_GH_FIELD = bounded(r"^(?P<key>[a-z][a-z-]*):[ \t]*(?P<value>.*?)\s*$")
_REPO = r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]*[A-Za-z0-9_])"
_URL = rf"https?://github\.com/{_REPO}/issues/(?P<number>\d+)\b"
# The same, its groups named `short_repo` and `short_number` (a pattern names a group once).
_SHORT = rf"\b{_REPO}#(?P<number>\d+)\b".replace("?P<", "?P<short_")
# The issue's own name opens a line ("apache/tvm#17357 (closed)", "URL: https://...", a
# link "[apache/tvm#17357](...)"); one inside a sentence ("a duplicate of apache/tvm#17243")
# names another issue.
_OWN_LINE = bounded(r"^[\s>*+\-\[(<]*(?:(?:url|issue|link|source)\**\s*[:=]\s*\**\s*[\[(<]*)?"
                    rf"(?:{_URL}|{_SHORT})(?P<rest>.*)$", re.IGNORECASE)
# "apache/tvm#17348 (closed)", "apache/tvm#17348 · Closed" after the issue's own name.
_STATE_AFTER = bounded(r"^(?:\]\([^)]*\))?\s*[(\[·|,\-–—]?\s*\**(?P<state>open|closed)\b",
                       re.IGNORECASE)
# "State: closed", "**Status:** Open", `gh`'s "state:\tCLOSED" pasted into a body.
_STATE_LINE = bounded(r"^[\s>*+\-]*\**(?:state|status)\**\s*[:=]\s*\**\s*`?"
                      r"(?P<state>open|closed)\b", re.IGNORECASE)
# GitHub's page shows the state alone on a line below the title ("Closed", "Closed as not
# planned"); only the lines between the heading and the first section or block are read so.
_STATE_BADGE = bounded(r"^\s*(?P<state>open|closed)(?:\s+as\s+(?:completed|not planned))?\s*$",
                       re.IGNORECASE)
_HEADING = bounded(r"^#\s+(?P<text>.+?)\s*#*\s*$")
# A heading's own decorations: GitHub's page title "T · Issue #17357 · apache/tvm", gh's
# terminal header "T apache/tvm#17357", or "apache/tvm#17357: T", "[#17357] T".
_PAGE_TITLE = bounded(rf"^(?P<title>.+?)\s+·\s+Issue\s+#(?P<number>\d+)\s+·\s+{_REPO}$")
_TRAILING = bounded(rf"^(?P<title>.+?)\s+\(?(?:{_REPO})?#(?P<number>\d+)\)?$")
_LEADING = bounded(rf"^\[?(?:{_REPO})?#(?P<number>\d+)\]?\s*[:\-–—]?\s+(?P<title>.+)$")


@dataclass
class Identity:
    """Who the issue is, the body its report is imported from, and where each field came from."""

    body: str
    number: int | None = None
    title: str | None = None
    state: str | None = None
    url: str | None = None
    repo: str | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def give(self, source: str, **found: str | int | None) -> None:
        """Take each field `source` gives that no earlier source gave."""
        for name, value in found.items():
            if value not in (None, "") and getattr(self, name) is None:
                setattr(self, name, value)
                self.sources[name] = source


def repo_of(url: str | None) -> str | None:
    """The repository of an issue's address ("apache/tvm"), or None."""
    found = re.match(_URL, url or "")
    return found.group("repo") if found else None


def gh_header(text: str) -> tuple[dict[str, str], str] | None:
    """The fields of a `gh issue view` header and the body below its "--", or None where the
    text does not open with one (its first line is `title:`)."""
    lines = text.replace("\r\n", "\n").split("\n")
    fields: dict[str, str] = {}
    for index, line in enumerate(lines):
        if line.strip() == "--" and "title" in fields:
            return fields, "\n".join(lines[index + 1:])
        found = _GH_FIELD.match(line)
        if found is None or (index == 0 and found.group("key") != "title"):
            return None
        fields.setdefault(found.group("key"), found.group("value"))
    return None


def _state(value: str | None, where: str) -> str | None:
    if not value:
        return None
    if value.upper() not in STATES:
        raise BadInput(where, f"must be OPEN or CLOSED, got {value[:40]!r}")
    return value.upper()


def _read_gh(identity: Identity, fields: dict[str, str], where: str) -> None:
    number = fields.get("number", "")
    if number and not number.isdigit():
        raise BadInput(f"{where}number", f"must be an integer, got {number[:40]!r}")
    url = re.fullmatch(_URL, fields.get("url", ""))
    identity.give(FROM_GH, number=int(number) if number else None, title=fields.get("title"),
                  state=_state(fields.get("state"), f"{where}state"),
                  url=url.group(0) if url else None, repo=url.group("repo") if url else None)


def title_heading(text: str) -> tuple[str, str] | None:
    """The text's `# title` heading (its first line that is not blank, a level-1 heading) and
    the text below it."""
    lines = text.replace("\r\n", "\n").split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    found = _HEADING.match(lines[first]) if first is not None else None
    if first is None or found is None:
        return None
    return found.group("text"), "\n".join(lines[first + 1:])


def _read_heading(identity: Identity, heading: str) -> None:
    for shape in (_PAGE_TITLE, _TRAILING, _LEADING):
        found = shape.match(heading)
        if found is not None:
            repo = found.group("repo")
            identity.give(FROM_HEADING, title=found.group("title").strip(),
                          number=int(found.group("number")), repo=repo)
            return
    identity.give(FROM_HEADING, title=heading)


def _preamble(prose: str) -> list[str]:
    """The lines above the body's first section heading."""
    lines = prose.split("\n")
    end = next((i for i, line in enumerate(lines) if line.lstrip().startswith("#")), len(lines))
    return lines[:end]


def _read_text(identity: Identity, body: str) -> None:
    """The issue's own name opening a line of the prose (its address, or `owner/repo#N`, the
    first that agrees with a number already known), and a state the prose states."""
    prose = outside_blocks(body)
    for line in prose.split("\n"):
        own = _OWN_LINE.match(line)
        if own is None:
            continue
        number = int(own.group("number") or own.group("short_number"))
        if identity.number not in (None, number):
            continue
        repo = own.group("repo") or own.group("short_repo")
        after = _STATE_AFTER.match(own.group("rest"))
        identity.give(FROM_TEXT, number=number, repo=repo,
                      url=f"https://github.com/{repo}/issues/{number}",
                      state=after.group("state").upper() if after else None)
        break
    stated = next((found for line in prose.split("\n") if (found := _STATE_LINE.match(line))),
                  None) or next((found for line in _preamble(prose)
                                 if (found := _STATE_BADGE.match(line))), None)
    identity.give(FROM_TEXT, state=stated.group("state").upper() if stated else None)


def issue_identity(text: str, file_name: str | None = None, where: str = "") -> Identity:
    """Who the issue of `text` is (`file_name`: its file's name without suffix, the last
    resort: "17357" or "tvm-17357" names #17357), and its body without the header and heading
    (a title such as "Error when ..." is not a section of the body's output). A bad header
    field is BadInput of `where` + its name ("ISSUE.txt: state", "reports[0].state")."""
    identity = Identity(body=text)
    header = gh_header(text)
    if header is not None:
        _read_gh(identity, header[0], where)
        identity.body = header[1]
    heading = title_heading(identity.body)
    if heading is not None and header is None:
        _read_heading(identity, heading[0])
        identity.body = heading[1]
    _read_text(identity, identity.body)
    if identity.url is None and identity.repo and identity.number is not None:
        identity.url = f"https://github.com/{identity.repo}/issues/{identity.number}"
        identity.sources["url"] = identity.sources["repo"]
    if file_name is not None:
        digits = re.fullmatch(r"\D*(\d+)", file_name)
        identity.give(FROM_FILE_NAME, number=int(digits.group(1)) if digits else None,
                      title=file_name)
    return identity
