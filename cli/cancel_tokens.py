"""The cancel tokens of the jobs this machine submitted, kept under TVMREPRO_HOME.

The service answers a submission with a token that DELETE of the job needs (only who submitted
a job may cancel it); `tvmrepro cancel` and a Ctrl-C of a waiting command read it back here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cli.output import error_console
from tvmrepro.api.views import JobView
from tvmrepro.errors import BadInput
from tvmrepro.settings import Settings

CANCEL_TOKENS = "cancel-tokens"  # under TVMREPRO_HOME: one file per job this machine submitted
_JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def cancel_token_file(job_id: str) -> Path:
    """Where the cancel token of a job submitted from here is kept."""
    if not _JOB_ID.fullmatch(job_id):
        raise BadInput("JOB", f"{job_id!r} is not a job id")
    return Settings.from_env().home / CANCEL_TOKENS / job_id


def keep_cancel_token(job: JobView) -> None:
    """Keep a submitted job's cancel token (readable by this user only); a home that cannot
    be written is said on stderr, the job goes on."""
    if not job.cancel_token:
        return
    path = cancel_token_file(job.id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(job.cancel_token)
    except OSError as exc:
        error_console().print(f"could not keep job {job.id}'s cancel token in {path} "
                              f"({exc.strerror}); it is {job.cancel_token}", highlight=False)


def kept_cancel_token(job_id: str) -> str | None:
    """The cancel token kept when this machine submitted the job, or None."""
    try:
        return cancel_token_file(job_id).read_text().strip() or None
    except OSError:
        return None
