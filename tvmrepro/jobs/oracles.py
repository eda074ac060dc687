"""Oracles: what makes one run `bad`, `good` or `skip` for a bisection or a reduction.

An oracle is `failure`, `status:<s>`, `signature` (the reference run's), `signature:<text>`,
`regex:<pattern>` (over the run's message and log, time-bounded) or `output` (the reference
run's outputs). Pure logic, no I/O; a regex oracle is never judged inside a store transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from tvmrepro.errors import BadInput
from tvmrepro.jobs.bounded import TooSlow, bounded, check
from tvmrepro.outputs import compare_outputs
from tvmrepro.results import FAILING, NOT_MEASURED, Status

ALWAYS_SKIP = NOT_MEASURED
MAX_REGEX_CHARS = 500
# A regex oracle reads text the run wrote: its match gets this much time (tvmrepro.jobs.bounded,
# the matcher of every pattern applied to a run's text), over at most REGEX_TEXT_CAP characters
# of it. Never run inside a store transaction.
REGEX_BUDGET_S = 0.2
REGEX_TEXT_CAP = 4 << 20


class OracleTooSlow(BadInput):
    """A regex oracle did not finish within its budget on a run's text (names the oracle)."""

    def __init__(self, oracle: str) -> None:
        super().__init__("oracle", f"{oracle} took longer than its budget of {REGEX_BUDGET_S} s "
                                   "on a run's message and log (a pattern that backtracks "
                                   "without end, such as (a+)+$ or (a|aa)+$?); use a pattern "
                                   "that anchors or repeats less")


class Verdict(str, Enum):
    """What an oracle says of one run, or of a probe."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"
    FLAKY = "flaky"  # a probe whose repeats disagree


@dataclass(frozen=True)
class Oracle:
    """A parsed oracle: its kind (failure, status, signature, regex, output) and argument."""

    kind: str
    argument: str | None = None

    @property
    def text(self) -> str:
        """The oracle as the user writes it."""
        return self.kind if self.argument is None else f"{self.kind}:{self.argument}"

    @property
    def needs_reference(self) -> bool:
        """Whether bad is judged against a reference environment's run."""
        return self.argument is None and self.kind in ("signature", "output")

    @property
    def needs_log(self) -> bool:
        """Whether the run's log is read (regex)."""
        return self.kind == "regex"


def parse_oracle(text: str) -> Oracle:
    """An oracle from its text; BadInput naming `oracle` when it is not one."""
    kind, colon, argument = text.partition(":")
    if kind in ("failure", "output") and not colon:
        return Oracle(kind)
    if kind == "signature":
        if colon and not argument:
            raise BadInput("oracle", "signature:<text> needs the text to look for")
        return Oracle(kind, argument if colon else None)
    if kind == "status" and colon:
        allowed = sorted(s.value for s in Status if s not in ALWAYS_SKIP)
        if argument not in allowed:
            raise BadInput("oracle", f"status:{argument} is not one of status:"
                                     f"{', status:'.join(allowed)} (incompatible and "
                                     "infra_error runs are always skip)")
        return Oracle(kind, argument)
    if kind == "regex" and colon:
        if not argument or len(argument) > MAX_REGEX_CHARS:
            raise BadInput("oracle", f"regex:<pattern> needs a pattern of 1 to "
                                     f"{MAX_REGEX_CHARS} characters")
        wrong = check(argument)
        if wrong is not None:
            raise BadInput("oracle", f"regex:{argument} is not a regular expression: {wrong}")
        return Oracle(kind, argument)
    raise BadInput("oracle", f"unknown oracle {text!r}; use failure, status:<s>, signature, "
                             "signature:<text>, regex:<pattern> or output")


# Judging runs ----------------------------------------------------------------

def regex_matches(oracle: Oracle, text: str) -> bool:
    """Whether a regex oracle's pattern is in `text`, within REGEX_BUDGET_S; OracleTooSlow if
    the pattern does not finish in time."""
    try:
        return bounded(oracle.argument or "", 0, REGEX_BUDGET_S).search(
            text[:REGEX_TEXT_CAP]) is not None
    except TooSlow as exc:
        raise OracleTooSlow(oracle.text) from exc


def judge(oracle: Oracle, result: dict[str, Any], reference: dict[str, Any] | None) -> Verdict:
    """One run's verdict; `result` may carry its log text under "log_text" (regex).

    OracleTooSlow when a regex oracle exceeds its budget on this run's text."""
    status = Status(result["status"])
    if status in ALWAYS_SKIP or result.get("environment_defect"):
        return Verdict.SKIP  # says nothing of the report: its environment cannot run it
    bad: bool
    if oracle.kind == "failure":
        bad = status in FAILING
    elif oracle.kind == "status":
        bad = status.value == oracle.argument
    elif oracle.kind == "signature" and oracle.argument is not None:
        # The text may be in either part: the frame and names, or the normalised message.
        bad = any(oracle.argument in (result.get(part) or "")
                  for part in ("signature", "signature_message"))
    elif oracle.kind == "signature":
        wanted = (reference or {}).get("signature")
        bad = wanted is not None and result.get("signature") == wanted
    elif oracle.kind == "regex":
        text = f"{result.get('message') or ''}\n{result.get('log_text') or ''}"
        bad = regex_matches(oracle, text)
    else:  # output: a run without outputs (it failed) has outputs that differ too
        if reference is None:
            return Verdict.SKIP
        compared = compare_outputs(result.get("outputs"), reference.get("outputs"))
        bad = status is not Status.OK or compared is None or compared.outputs == "differs"
    return Verdict.BAD if bad else Verdict.GOOD


def combine(verdicts: list[Verdict]) -> Verdict:
    """A probe's verdict from its repeats: skips aside, agreeing runs decide, else flaky."""
    decided = {v for v in verdicts if v is not Verdict.SKIP}
    if not decided:
        return Verdict.SKIP
    return decided.pop() if len(decided) == 1 else Verdict.FLAKY
