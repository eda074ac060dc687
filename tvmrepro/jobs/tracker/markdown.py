"""What an issue body says, read from its Markdown: its fenced blocks (with the section each
sits in), the TVM version it states, and the error it quotes."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tvmrepro.jobs.bounded import bounded
from tvmrepro.jobs.tracker.stages import traceback_stage

_FENCE = bounded(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_HEADING = bounded(r"^\s{0,3}#{1,6}\s+(?P<text>.+?)\s*#*\s*$")
# "TVM: 0.17.dev0", "TVM version: `0.22.0`", "tvm: v0.14.dev0-595-gfa0d35b", "TVM v0.18.0 built..."
_VERSION = bounded(r"\btvm(?:\s+version)?\s*[:=]?\s*`?v?(?P<v>\d+\.\d+(?:\.[0-9A-Za-z]+)*)",
                   re.IGNORECASE)
# The last line of a traceback: `tvm.error.InternalError: ...`, `TVMError: ...`, `ValueError: ...`.
_ERROR_LINE = bounded(r"^\s*(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception))"
                      r"\s*:\s*(?P<message>\S.*)$")
_CRASH_LINE = bounded(r"segmentation fault|segfault|core dump|SIGSEGV|SIGABRT|Aborted \(core",
                      re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """One fenced block: its info string's first word, its text, the heading above it."""

    language: str
    text: str
    section: str
    closed: bool  # False: the body ended inside it (a stored copy cut short)


@dataclass(frozen=True)
class QuotedError:
    """The error a report quotes: a Python exception's last line, or a crash."""

    error_type: str  # e.g. "InternalError", or "crash"
    message: str
    stage: str | None = None  # where its traceback shows it was raised ("build"), if it shows

    @property
    def line(self) -> str:
        """As the report shows it."""
        return self.message if self.error_type == "crash" else f"{self.error_type}: {self.message}"


def fenced_blocks(body: str) -> list[Block]:
    """Every fenced block of `body`, in order; one still open at the end runs to the end."""
    blocks: list[Block] = []
    section = ""
    lines = body.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        heading = _HEADING.match(lines[i])
        opening = _FENCE.match(lines[i])
        if heading and not opening:
            section = heading.group("text")
        if not opening:
            i += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        language = (opening.group("info").strip().split() or [""])[0].lower()
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(fence[0] * len(fence))
                    and not lines[j].strip().strip(fence[0])), None)
        inner = lines[i + 1:end if end is not None else len(lines)]
        # A fence indented by n spaces takes up to n spaces off each of its lines (CommonMark).
        text = "\n".join(line[min(indent, len(line) - len(line.lstrip(" "))):] for line in inner)
        blocks.append(Block(language, text, section, end is not None))
        i = len(lines) if end is None else end + 1
    return blocks


def outside_blocks(body: str) -> str:
    """The body's prose: its text with the fenced blocks taken out."""
    kept: list[str] = []
    fence: str | None = None
    for line in body.replace("\r\n", "\n").split("\n"):
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening.group("fence")
        elif fence is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None:
            kept.append(line)
    return "\n".join(kept)


def stated_version(body: str) -> str | None:
    """The TVM version the report states (e.g. "0.17.dev0"), or None."""
    found = _VERSION.search(body)
    return found.group("v") if found else None


def last_error_line(text: str) -> QuotedError | None:
    """The error a quoted output ends with: its last exception line, or a crash after it."""
    found: QuotedError | None = None
    for line in text.splitlines():
        if _CRASH_LINE.search(line):
            found = QuotedError("crash", line.strip())
            continue
        match = _ERROR_LINE.match(line)
        # "InternalError: Traceback (most recent call last):" opens a traceback; it ends elsewhere.
        if (match and not line.lstrip().startswith(("File ", "raise ", "#"))
                and not match.group("message").startswith("Traceback")):
            found = QuotedError(match.group("type").rsplit(".", 1)[-1],
                                match.group("message").strip())
    return found


def titled_error(title: str) -> QuotedError | None:
    """The error a title names ("[Bug] TVM cannot build: InternalError: Check failed: ...")."""
    for start in (m.start() for m in re.finditer(r"\b\w*(?:Error|Exception)\s*:", title)):
        match = _ERROR_LINE.match(title[start:])
        if match:
            return QuotedError(match.group("type").rsplit(".", 1)[-1], match.group("message").strip())
    return None


def quoted_error(blocks: list[Block], prose: str) -> QuotedError | None:
    """The error the report quotes: the first quoted output that ends with one, else the prose's
    own (a report may name it in a sentence: "InternalError: Check failed: ...")."""
    for block in blocks:
        found = last_error_line(block.text)
        if found is not None:
            return replace(found, stage=traceback_stage(block.text))
    found = last_error_line(prose)
    return replace(found, stage=traceback_stage(prose)) if found is not None else None
