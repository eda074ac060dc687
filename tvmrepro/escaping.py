"""Text that a run (or a case) wrote, made safe for where it is shown.

What a run reports about itself (error types, messages, stages, pass names, IR, logs) and what a
case says (its title, variant names, source) are written by whoever submitted it, and are read
by someone else: in a Markdown report pasted into a GitHub issue, or in a terminal. Every
printer of such text goes through one of these functions:

- Markdown: `code_span` for inline text (one line, in a code span, so no heading, link, image,
  HTML, emphasis or @mention can come out of it), `table_cell` for the same in a table (pipes
  escaped too), `code_block` for a block (a fence longer than any run of backticks inside).
- Terminals: `visible` shows control characters as escapes (`\\x1b`), keeping newlines and
  tabs where the text is a log; `visible_line` keeps nothing (one line of a table or a message).
- HTML is left to the page's Jinja autoescape and its scripts, which build text nodes only.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI to some terminals), and the Unicode
# format characters that reorder or hide text (bidirectional overrides and isolates).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_BACKTICKS = re.compile("`+")


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str, keep: str = "\n\t") -> str:
    """The text with every control character shown as an escape (`\\x1b`, `\\r`), except those
    in `keep` (newlines and tabs by default: a log stays readable)."""
    if not keep:
        return _CONTROL.sub(_escape_char, text)
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _escape_char(m), text)


def visible_line(text: Any) -> str:
    """One line for a terminal: every control character, newlines included, as an escape."""
    return visible("" if text is None else str(text), keep="")


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def code_span(text: Any) -> str:
    """Inline Markdown code holding `text` on one line, whatever it contains."""
    content = visible_line(text)
    if not content:
        return "` `"
    ticks = "`" * (_longest_backticks(content) + 1)
    if content[0] in "` " or content[-1] in "` ":
        content = f" {content} "  # the parser strips one space from each side
    return f"{ticks}{content}{ticks}"


def table_cell(text: Any) -> str:
    """A code span for a cell of a GitHub table: a pipe splits cells even inside code, so it is
    escaped (the backslash is not shown)."""
    return code_span(text).replace("|", "\\|")


def code_block(text: str, info: str = "") -> list[str]:
    """A fenced Markdown code block of `text` (its lines), fenced longer than any backtick run
    inside; control characters other than tabs are shown as escapes. `info` is trusted."""
    body = visible(text.rstrip("\n"))
    fence = "`" * max(3, _longest_backticks(body) + 1)
    return [fence + info, *body.split("\n"), fence] if body else [fence + info, fence]
