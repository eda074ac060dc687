"""What the bot keeps per issue, in two halves written by one side each (so neither loses the
other's writes): the inbox, what the webhook took (the issue, the jobs of its checks, the
commands asked), and the state, what the follow-up did (the checks it counted, the comments it
owns, the labels it set). The fix's state machine is here: a report that stops failing is
asked to be confirmed after N passing checks, never closed by a run; failing again withdraws it.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

MAX_COUNTED = 20  # checks kept per issue (the newest)
MAX_COMMANDS = 20  # commands kept per issue (the status comment shows them)


class Command(BaseModel):
    """One command asked in a comment, and what the webhook made of it."""

    name: str
    args: list[str] = Field(default_factory=list)
    by: str
    at: float = Field(default_factory=time.time)
    job: str | None = None  # the job that answers it
    job_kind: str | None = None
    refused: str | None = None  # why the commenter may not ask it
    error: str | None = None  # why it could not be asked of the service
    note: str | None = None  # an answer given at once (dup, undup, close)


class Inbox(BaseModel):
    """What the webhook took of an issue (written by the API only)."""

    repo: str
    number: int
    title: str = ""
    author: str | None = None
    assignees: list[str] = Field(default_factory=list)
    installation: int | None = None
    url: str | None = None
    # The issue as a triage takes it (number, title, state, body, url), as last seen.
    item: dict[str, Any] | None = None
    report_job: str | None = None  # the triage that imported the report last
    checks: list[str] = Field(default_factory=list)  # check triages, oldest first
    check_error: str | None = None  # why the last check could not be submitted
    commands: list[Command] = Field(default_factory=list)
    # Per comment id, the commands taken from it ("run <version>"): an edit of the comment asks
    # only what it adds, a redelivery nothing.
    taken: dict[str, list[str]] = Field(default_factory=dict)
    duplicate_of: int | None = None
    duplicate_by: str | None = None
    not_duplicate: bool = False
    close_by: str | None = None
    closed: bool = False  # closed on GitHub (a sweep leaves it out)


class Row(BaseModel):
    """One release of a check's matrix."""

    env: str
    status: str
    stage: str | None = None
    signature: str | None = None


class Check(BaseModel):
    """One finished run of the report on the default releases, as the follow-up counted it."""

    job: str  # the triage job
    run_job: str | None
    verdict: str
    since: str | None = None
    environments: list[str]
    environments_why: str | None = None
    not_probed: list[str] = Field(default_factory=list)
    rows: list[Row] = Field(default_factory=list)
    signature: str | None = None  # the bug's (triage's group signature): the flood's key
    quoted_error_reproduced: bool | None = None
    no_code: str | None = None
    incompatible: str | None = None
    duplicates: list[int] = Field(default_factory=list)
    reproducer: str | None = None
    reproducer_env: str | None = None


class BotState(BaseModel):
    """What the follow-up did on an issue (written by the follow-up only)."""

    counted: list[Check] = Field(default_factory=list)
    passes: int = 0  # consecutive checks that pass on the newest release
    failed_before: bool = False  # a counted check reproduced it
    failing_again: str | None = None
    confirm_comment: int | None = None
    tracking_comment: int | None = None
    tracking_body: str | None = None
    status_comment: int | None = None
    status_body: str | None = None
    confirm_body: str | None = None
    labels: list[str] = Field(default_factory=list)  # the labels the bot set and keeps
    # The marks of comments being posted (a POST whose answer was not seen yet): a follow-up
    # that finds one looks on the issue for the comment a failed POST may have made.
    posting: list[str] = Field(default_factory=list)
    leader: int | None = None  # the flood's first report, where it is another
    closed: bool = False

    @property
    def latest(self) -> Check | None:
        """The newest check counted."""
        return self.counted[-1] if self.counted else None


def passing(check: Check, failed_before: bool) -> bool:
    """Whether a check says the report no longer fails: fixed (failed on an older release),
    or passing everywhere after an earlier check saw it fail."""
    return check.verdict == "fixed" or (check.verdict == "never_reproduced" and failed_before)


def count_check(state: BotState, check: Check) -> BotState:
    """The state after a check: passes counted (consecutive), or a failure after passes,
    which withdraws the fixed verdict and says so; checks that measured nothing (no code, an
    incompatible script) change neither."""
    counted = [*state.counted, check][-MAX_COUNTED:]
    update: dict[str, object] = {"counted": counted}
    if passing(check, state.failed_before):
        update |= {"passes": state.passes + 1, "failing_again": None}
    elif check.verdict == "reproduces":
        newest = check.environments[-1] if check.environments else "the newest release"
        if state.passes or state.confirm_comment is not None:
            update["failing_again"] = (f"it fails again on {newest} after {state.passes} "
                                       "passing check(s): the fixed verdict is withdrawn")
        update |= {"passes": 0, "failed_before": True, "confirm_comment": None,
                   "confirm_body": None}
    return state.model_copy(update=update)


def wants_confirmation(state: BotState, needed: int) -> bool:
    """Whether to ask the author and assignees to confirm a fix: `needed` passing checks in a
    row, not asked since the last failure."""
    return state.passes >= needed and state.confirm_comment is None
