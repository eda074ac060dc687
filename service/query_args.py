"""Numbers in a query string (?limit=20, ?offset=40, ?wait=30): ASCII digits only.

`str.isdigit` also takes other scripts' digits and superscripts ("²", "٣"), which `int` then
refuses or reads as another number: a query argument is a number only as ASCII writes it.
"""

from __future__ import annotations

from flask import request

from tvmrepro.errors import BadInput

MAX_DIGITS = 12  # no query argument needs more; a longer one is refused before int() reads it


def ascii_int(text: str | None) -> int | None:
    """The non-negative integer `text` spells in ASCII digits, else None."""
    if text is None or not 0 < len(text) <= MAX_DIGITS or not text.isascii() \
            or not text.isdigit():
        return None
    return int(text)


def int_arg(name: str, default: int, low: int, high: int) -> int:
    """The request's query number `name` (ASCII digits, from low to high), else `default`
    where it is not given; BadInput names it."""
    text = request.args.get(name)
    if text is None:
        return default
    value = ascii_int(text)
    if value is None or not low <= value <= high:
        raise BadInput(name, f"must be an integer from {low} to {high}, got {text[:40]!r}")
    return value
