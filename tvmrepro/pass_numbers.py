"""How a pass is numbered wherever a user reads its number: from 0, as the stage of a run that
failed in it (`pass:<index>:<Name>`) numbers it, so that one answer never counts two ways."""

from __future__ import annotations

# Said once in each answer that numbers passes (the command line's, the page's, the report's).
FROM_ZERO = "passes count from 0, as in the stage pass:<index>:<Name>"
FROM_ZERO_MARKDOWN = "Passes count from 0, as in the stage `pass:<index>:<Name>`."


def after_pass(index: int) -> str:
    """'after pass 2': the IR or the table that pass `index` (from 0) left."""
    return f"after pass {index}"
