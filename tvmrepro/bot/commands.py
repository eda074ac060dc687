"""Commands in comments: `@tvm-repro NAME [ARGS]` alone at the start of a line of prose (not in
a code block, not in a quote), and who may ask them: the author associations the deployment
allows (TVMREPRO_GITHUB_ALLOWED_ASSOCIATIONS) and the issue's author, a maintainer's only for
what decides the issue (dup, undup, close)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tvmrepro.environments import Catalog
from tvmrepro.jobs.tracker.markdown import outside_blocks
from tvmrepro.settings import MAX_ISSUE_NUMBER, Settings

MAX_COMMANDS = 5  # per comment; more are not read
MAX_ARGS = 8
# What each command does (docs/bot.md): the webhook maps each onto a job kind.
COMMANDS = ("run", "bisect", "reduce", "since", "test", "dup", "undup", "close")
MAINTAINERS_ONLY = frozenset({"dup", "undup", "close"})
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")
_ISSUE = re.compile(r"#?(\d{1,9})")


@dataclass(frozen=True)
class Asked:
    """One command as written."""

    name: str
    args: tuple[str, ...]


def asked_in(body: str, bot: str) -> list[Asked]:
    """The commands a comment asks of `bot`, in order (at most MAX_COMMANDS)."""
    pattern = re.compile(rf"^\s{{0,3}}@{re.escape(bot)}\b[ \t]*(\S*)(.*)$", re.IGNORECASE)
    found = []
    for line in outside_blocks(body or "").splitlines():
        match = pattern.match(line)
        if match and not line.lstrip().startswith(">"):
            args = tuple(arg for arg in re.split(r"[\s,]+", match.group(2).strip()) if arg)
            found.append(Asked(match.group(1).lower(), args[:MAX_ARGS]))
    return found[:MAX_COMMANDS]


def allowed_associations(settings: Settings) -> list[str]:
    """The author associations whose commands the bot takes."""
    return [name.strip().upper() for name in settings.github_allowed_associations.split(",")
            if name.strip()]


def refusal(name: str, association: str, login: str, author: str | None,
            settings: Settings) -> str | None:
    """Why `login` (of `association`) may not ask `name`, or None where they may."""
    allowed = allowed_associations(settings)
    maintainer = association.upper() in allowed
    if maintainer or (name not in MAINTAINERS_ONLY and author is not None
                      and login.lower() == author.lower()):
        return None
    who = ", ".join(allowed) or "nobody"
    if name in MAINTAINERS_ONLY:
        return f"`{name}` is taken from the repository's maintainers ({who}) only"
    return f"commands are taken from the repository's maintainers ({who}) and the issue's author"


def login_text(login: str) -> str:
    """A GitHub login as a mention, or in a code span where it is no login."""
    return f"@{login}" if _LOGIN.fullmatch(login) else f"`{login[:40]}`"


def releases(args: tuple[str, ...], catalog: Catalog) -> list[str]:
    """The environments that a command's arguments name (a release, the release with a "v"
    before it, or an environment id); ValueError names one the catalog lacks."""
    found = []
    for arg in args:
        name = arg.lower().removeprefix("v")
        candidates = (name, f"tvm-{name}-cpu", f"tvm-{name}")
        env = next((c for c in candidates if c in catalog.ids), None)
        if env is None:
            raise ValueError(f"no release {arg[:40]!r}; releases: "
                             + ", ".join(e.release for e in catalog.environments
                                         if e.device == "cpu"))
        found.append(env)
    return list(dict.fromkeys(found))


def issue_number(args: tuple[str, ...], own: int) -> int:
    """The issue `dup #N` names; ValueError says what is wrong."""
    match = _ISSUE.fullmatch(args[0]) if args else None
    if match is None:
        raise ValueError("name the issue it duplicates: `dup #N`")
    number = int(match.group(1))
    if not 1 <= number <= MAX_ISSUE_NUMBER or number == own:
        raise ValueError(f"#{number} is not another issue of this tracker")
    return number
