"""Regular expressions over text that a run or a report's author wrote, each within a time budget.

Python's `re` backtracks without limit: a pattern that is linear on the text TVM prints can be
quadratic or cubic on text made to defeat it (`Check failed: ( vs. ` repeated), and a forged
message of a few kilobytes then holds a worker for minutes. Every pattern applied to such text
(oracles, suspects, the tracker's import, crashes, an environment's defect) is a `Bounded`: the
`regex` package's engine with its `timeout=`, checked as it backtracks, and with the GIL
released (`concurrent=True`), so that a match in one thread never stops another one's
heartbeat. A call that runs past its budget raises `TooSlow`, a BadInput: its caller says what
the text cost it (no suspects, a report refused), never hangs.

`within(seconds)` gives a whole piece of work one budget that its calls share (the frames of a
megabyte of log are thousands of calls, each cheap): a call gets the smaller of its own budget
and what is left of the block's, and one that finds nothing left raises `TooSlow` at once. A
block's budget is spent by its calls' matching only, not by the work between them: on a busy
host a report's import (parsing its Python, reading its blocks) may take seconds of wall clock
for a few milliseconds of patterns, and is no attack.

The engine is compiled at first use: importing `regex` costs about 45 ms, which a command that
matches nothing does not pay.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

from tvmrepro.errors import BadInput

P = ParamSpec("P")
R = TypeVar("R")
# One call. A plain pattern on a report takes milliseconds; the budget is wide enough that a
# busy host (the first call also loads the engine) never trips it, and still stops a pattern
# made to backtrack for hours.
CALL_BUDGET_S = 1.0
TEXT_CAP = 4 << 20  # characters of one text a call reads at most


class _Share:
    """What is left of one `within` block's budget, spent by its calls as they match."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds


_SHARES: ContextVar[tuple[_Share, ...]] = ContextVar("tvmrepro_bounded_shares", default=())


class TooSlow(BadInput):
    """A pattern did not finish within its budget on a text (`field` names what it read)."""

    def __init__(self, pattern: str, budget_s: float, field: str = "text") -> None:
        super().__init__(field, f"matching {pattern[:80]!r} took longer than its budget of "
                                f"{budget_s:g} s (the text is made to make it backtrack)")
        self.pattern, self.budget_s = pattern, budget_s


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Every Bounded call in the block shares `seconds` of matching (inside another block: each
    call spends both blocks' budgets)."""
    token = _SHARES.set((*_SHARES.get(), _Share(seconds)))
    try:
        yield
    finally:
        _SHARES.reset(token)


def time_bounded(seconds: float) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A function whose every call runs `within(seconds)`."""
    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def bounded_call(*args: P.args, **kwargs: P.kwargs) -> R:
            with within(seconds):
                return function(*args, **kwargs)
        return bounded_call
    return decorate


class Bounded:
    """A compiled pattern whose every call runs within its budget (`re`'s syntax and flags)."""

    def __init__(self, pattern: str, flags: int = 0, budget_s: float = CALL_BUDGET_S) -> None:
        self.pattern, self.flags, self.budget_s = pattern, int(flags), budget_s
        self._compiled: Any = None

    def _engine(self) -> Any:
        if self._compiled is None:
            import regex  # only once text is matched: see the module's docstring

            self._compiled = regex.compile(self.pattern, self.flags)
        return self._compiled

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        shares = _SHARES.get()
        budget = min([self.budget_s, *(share.left for share in shares)])
        if budget <= 0:
            raise TooSlow(self.pattern, self.budget_s)
        function: Callable[..., Any] = getattr(self._engine(), method)
        started = time.monotonic()
        try:
            found = function(*args, concurrent=True, timeout=budget, **kwargs)
            # An iterator matches as it is read: read it here, within the budget.
            return list(found) if method == "finditer" else found
        except TimeoutError as exc:
            raise TooSlow(self.pattern, self.budget_s) from exc
        finally:
            spent = time.monotonic() - started
            for share in shares:
                share.left -= spent

    def search(self, text: str, pos: int = 0) -> Any:
        """`re.Pattern.search`, within the budget (TooSlow past it)."""
        return self._call("search", text[:TEXT_CAP], pos)

    def match(self, text: str, pos: int = 0) -> Any:
        """`re.Pattern.match`, within the budget."""
        return self._call("match", text[:TEXT_CAP], pos)

    def fullmatch(self, text: str) -> Any:
        """`re.Pattern.fullmatch`, within the budget (a text past TEXT_CAP never matches)."""
        return None if len(text) > TEXT_CAP else self._call("fullmatch", text)

    def findall(self, text: str) -> list[Any]:
        """`re.Pattern.findall`, within the budget."""
        found: list[Any] = self._call("findall", text[:TEXT_CAP])
        return found

    def finditer(self, text: str) -> list[Any]:
        """`re.Pattern.finditer`, read whole within the budget (a list of matches)."""
        found: list[Any] = self._call("finditer", text[:TEXT_CAP])
        return found

    def sub(self, replacement: Any, text: str, count: int = 0) -> str:
        """`re.Pattern.sub`, within the budget."""
        done: str = self._call("sub", replacement, text[:TEXT_CAP], count)
        return done


@functools.lru_cache(maxsize=256)
def bounded(pattern: str, flags: int = 0, budget_s: float = CALL_BUDGET_S) -> Bounded:
    """The Bounded of a pattern (made once per pattern, flags and budget)."""
    return Bounded(pattern, flags, budget_s)


def check(pattern: str) -> str | None:
    """Why `pattern` is not a regular expression the engine takes, else None."""
    import regex

    try:
        regex.compile(pattern)
    except (regex.error, ValueError) as exc:
        return str(exc)
    return None
