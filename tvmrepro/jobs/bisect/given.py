"""Commit windows and suspects that a bisect job's submitter computed from a history of its own
(`tvmrepro bisect --history PATH` through the service): checked, kept with the job
(`bisections.windows`) and read over the step's own, so that the job's page and report show
what its command showed.

Only the submitter gives them (the job's cancel token), only for the job's own transitions and
only once its bisection is finished. Their links are made here from the commits and PRs, never
taken as given: a page shows them to everyone who opens the job.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tvmrepro.api.views import Bisection, CommitWindow, Suspect
from tvmrepro.cases import bad_input
from tvmrepro.errors import BadInput
from tvmrepro.history import REPOSITORY_URL

_SHA = re.compile(r"^[0-9a-f]{7,40}$")
MAX_GIVEN = 64  # transitions in one body (a bisection of every release has at most nine)


class GivenWindow(BaseModel):
    """One transition's window and suspects, as the command line computed them."""

    model_config = ConfigDict(extra="forbid")
    before: str
    after: str
    window: CommitWindow
    suspects: list[Suspect] = Field(max_length=10)


class GivenWindows(BaseModel):
    """PUT /api/v1/jobs/<id>/windows."""

    model_config = ConfigDict(extra="forbid")
    transitions: list[GivenWindow] = Field(max_length=MAX_GIVEN)


def _sha(text: str | None, field: str) -> str | None:
    if text is None:
        return None
    if not _SHA.match(text):
        raise BadInput(field, f"not a commit sha: {text[:80]!r}")
    return text


def _linked(given: GivenWindow, index: int) -> GivenWindow:
    """The window and suspects with their links made from their commits."""
    where = f"transitions[{index}]"
    span = given.window
    start = _sha(span.from_commit, f"{where}.window.from_commit")
    stop = _sha(span.to_commit, f"{where}.window.to_commit")
    compare = f"{REPOSITORY_URL}/compare/{start}...{stop}" if start and stop else None
    suspects = []
    for n, suspect in enumerate(given.suspects):
        sha = _sha(suspect.sha, f"{where}.suspects[{n}].sha") or ""
        url = (f"{REPOSITORY_URL}/pull/{suspect.pr}" if suspect.pr
               else f"{REPOSITORY_URL}/commit/{sha}")
        suspects.append(suspect.model_copy(update={"url": url}))
    return given.model_copy(update={"window": span.model_copy(update={"compare_url": compare}),
                                    "suspects": suspects})


def checked(body: Any, found: Bisection | None) -> list[dict[str, Any]]:
    """The windows a body gives, as they are kept; BadInput names what is wrong."""
    try:
        given = GivenWindows.model_validate(body)
    except ValidationError as exc:
        raise bad_input(exc, "body") from exc
    if found is None or not found.finished:
        raise BadInput("transitions", "the bisection is not finished: its transitions may "
                                      "still change")
    known = {(t.before, t.after) for t in found.transitions}
    kept = []
    for index, change in enumerate(given.transitions):
        if (change.before, change.after) not in known:
            raise BadInput(f"transitions[{index}]", f"{change.before} -> {change.after} is not "
                                                    "a transition of the job's bisection")
        kept.append(_linked(change, index).model_dump(mode="json"))
    return kept


def given_over(found: dict[str, Any], windows: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A stored bisect object with the submitter's windows and suspects over the step's own."""
    if not windows:
        return found
    by_pair = {(w["before"], w["after"]): w for w in windows}
    transitions = []
    for change in found.get("transitions") or []:
        given = by_pair.get((change["before"], change["after"]))
        transitions.append({**change, "window": given["window"], "suspects": given["suspects"]}
                           if given else change)
    return {**found, "transitions": transitions}
