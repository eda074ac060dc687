"""The one matcher of a run's text (tvmrepro.jobs.bounded), and every reader built on it.

Forged text of 64 KiB (the message cap) made to make patterns backtrack: `Check failed: ( vs. `
repeated took `re` minutes to hours in the suspects, the tracker's import and a crash's frames.
Each reader here ends within its budget on each of them, its answer what a bound leaves it.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tvmrepro.errors import BadInput
from tvmrepro.jobs.bisect.suspects import evidence
from tvmrepro.jobs.bounded import CALL_BUDGET_S, Bounded, TooSlow, bounded, within
from tvmrepro.jobs.tracker.importing import IMPORT_BUDGET_S, import_body, import_markdown
from worker.crashes import CRASH_BUDGET_S, crash_frames

CAP = 64 << 10
SLACK_S = 3.0  # a budget measured to overshoot up to about 3x on a busy host
# Repeated to CAP: each makes some pattern of these readers backtrack (found by timing them).
UNITS = ["Check failed: ( vs. ", " \n", "\t", " ", "*", ".a", "a_", "1.", "[with ", "a::",
         'File "/project/a", line 1, in ', "> ", "# ", "TVMError: ", "https://github.com/a/"]


def forged(unit: str) -> str:
    return (unit * (CAP // len(unit) + 1))[:CAP]


def test_a_pattern_that_backtracks_ends_at_its_budget() -> None:
    with pytest.raises(TooSlow, match=rf"took longer than its budget of {CALL_BUDGET_S:g} s"):
        bounded(r"(a|aa)+$").search("a" * 40 + "b")
    # (without a budget: 2**40 steps; that it ended at all is the bound)
    assert isinstance(TooSlow("x", 0.1), BadInput)  # a caller may refuse the text with it


def test_a_block_shares_one_budget_and_the_sooner_deadline_wins() -> None:
    slowish = Bounded(r"(?:a|b)*c", budget_s=1.0)  # quadratic: a few ms on 3000 characters
    calls, started = 0, time.monotonic()
    with pytest.raises(TooSlow), within(10.0), within(0.3):
        while True:
            slowish.search("ab" * 1500)
            calls += 1
    assert calls > 0 and time.monotonic() - started < 0.3 * SLACK_S
    with within(-1.0), pytest.raises(TooSlow):  # nothing left: refused before it starts
        bounded(r"x").search("x")
    assert bounded(r"x").search("x") is not None  # outside the block: its own budget again


def test_a_block_is_spent_by_matching_only_not_by_the_work_between_its_calls() -> None:
    """A busy host stretches an import's other work (parsing its Python): no attack."""
    with within(0.2):
        time.sleep(0.3)
        assert bounded(r"\.(onnx|pt)$").search("model.onnx") is not None


@pytest.mark.parametrize(("pattern", "flags", "text"), [
    (r"^(?P<key>[a-z]+):\s*(?P<value>.*?)\s*$", re.M, "title: x  \nstate:\tOPEN\n"),
    (r"(?<![\w.])(\w+)\.defined\(\)", 0, "a.b.defined() && c.defined()"),
    (r"\bError\b", re.I, "an error, ERROR and Errors"),
])
def test_a_bounded_pattern_reads_as_re(pattern: str, flags: int, text: str) -> None:
    ours, theirs = bounded(pattern, flags), re.compile(pattern, flags)
    found, expected = ours.search(text), theirs.search(text)
    assert found is not None and expected is not None and found.span() == expected.span()
    assert ours.findall(text) == theirs.findall(text)
    assert [m.span() for m in ours.finditer(text)] == [m.span() for m in theirs.finditer(text)]
    assert ours.sub("<\\g<0>>", text) == theirs.sub("<\\g<0>>", text)
    assert (ours.match(text) is None) == (theirs.match(text) is None)
    assert ours.fullmatch(text[:3]) is None or theirs.fullmatch(text[:3]) is not None


def test_a_match_never_stops_another_thread() -> None:
    """A worker's main process heartbeats on one thread: a match in another (its GIL released)
    never holds it up, as `re` would for the whole match."""
    beats: list[float] = []
    done = threading.Event()

    def heartbeat() -> None:
        while not done.is_set():
            beats.append(time.monotonic())
            time.sleep(0.01)

    beating = threading.Thread(target=heartbeat)
    beating.start()
    try:
        with pytest.raises(TooSlow):
            Bounded(r"(a|aa)+$", budget_s=0.5).search("a" * 40 + "b")
    finally:
        done.set()
        beating.join()
    gaps = [later - earlier for earlier, later in zip(beats, beats[1:], strict=False)]
    assert len(beats) > 20 and max(gaps) < 0.3, max(gaps)


def _suspects(text: str) -> Any:
    failing = {"message": text, "log_text": text, "signature_frame": "X::Y",
               "native_frames": None}
    try:
        with within(5.0):
            return evidence("regression", failing, {"script": "import tvm\n"}, None)
    except TooSlow:
        return None


def _imported(text: str) -> Any:
    try:
        return import_markdown(f"# title\n\n{text}\n```python\n{text}\n```\n")
    except TooSlow:
        return None


def _body(text: str) -> Any:
    try:
        return import_body(f"## Actual behavior\n```\n{text}\n```\n{text}", title=text[:300])
    except TooSlow:
        return None


def _crash(text: str) -> Any:
    return crash_frames(f"!!!!!!! Segfault encountered !!!!!!!\n{text}\n  File \"x\", "
                        f"line 1, in {text}\n")


READERS: dict[str, tuple[Callable[[str], Any], float]] = {
    "suspects": (_suspects, 5.0), "import_markdown": (_imported, IMPORT_BUDGET_S),
    "import_body": (_body, IMPORT_BUDGET_S), "crash_frames": (_crash, CRASH_BUDGET_S)}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_forged_text_costs_every_reader_its_budget_at_most(reader: str) -> None:
    read, budget = READERS[reader]
    worst = 0.0
    for unit in UNITS:
        started = time.monotonic()
        read(forged(unit))
        worst = max(worst, time.monotonic() - started)
    assert worst < budget * SLACK_S, (reader, worst)
