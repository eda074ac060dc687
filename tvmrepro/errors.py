"""Faults of tvm-repro itself, rooted at one class.

    ReproError                  anything tvm-repro raises on purpose
    ├── BadInput                the user gave something wrong (exit code 2, HTTP 400);
    │                           `.field` names what, e.g. "variants[1].passes[0]"
    │   └── UnknownEnvironment  an environment id not in images/environments.toml
    ├── NotServed               no live worker serves an environment the job names (HTTP 409)
    ├── Forbidden               the caller may not do this, e.g. cancel without the job's token
    │                           (HTTP 403)
    ├── ProvisionError          a pinned environment could not be made
    └── RuntimeFault            the sandbox or engine failed, not the case (infra_error)

A case that fails, crashes or times out is a result with a status, never an
exception: these are only for faults of the service and for bad input.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ReproError(Exception):
    """Root of every error tvm-repro raises on purpose."""


class BadInput(ReproError):
    """The input is wrong; `field` names the part that is."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"; did you mean X?" for the known name closest to a mistyped one (case aside), or ""."""
    by_lower = {k.lower(): k for k in known}
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return f"; did you mean {by_lower[near[0]]}?" if near else ""


class UnknownEnvironment(BadInput):
    """An environment id that the catalog does not list."""

    def __init__(self, env_id: str, known: list[str], field: str = "environments") -> None:
        super().__init__(field, f"unknown environment {env_id!r}{did_you_mean(env_id, known)}; "
                                f"known: {', '.join(known)}")
        self.env_id = env_id


class NotServed(ReproError):
    """A job names environments that no live worker serves: it would wait with no end in sight."""

    def __init__(self, env_ids: list[str], field: str) -> None:
        super().__init__(f"no live worker serves {', '.join(env_ids)}; start one "
                         f"(tvmrepro worker --env {env_ids[0]}) or submit with \"wait\": true "
                         f"(the command line's --queue) to queue the runs until one does")
        self.env_ids, self.field = env_ids, field


class Forbidden(ReproError):
    """The request may not do this (HTTP 403): e.g. a cancel without the job's cancel token."""

    def __init__(self, problem: str, field: str) -> None:
        super().__init__(problem)
        self.problem, self.field = problem, field


class ProvisionError(ReproError):
    """A pinned environment could not be created."""


class RuntimeFault(ReproError):
    """The sandbox or container engine failed; the run ends as infra_error."""
