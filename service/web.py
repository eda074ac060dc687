"""The pages for people: `/` (paste a case and submit) and `/jobs/<id>` (a job, shareable).

The pages are HTML shells; their scripts read and write everything through the
JSON API of the same origin, so the page and the command line see one service.
"""

from __future__ import annotations

import json
import time
from functools import cache
from importlib import resources
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, make_response, render_template
from pydantic import BaseModel, Field

from service.jobs import JobService
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.settings import MAX_FILE_BYTES, MAX_FILES, MAX_FILES_BYTES

BOT_PAGE_ROWS = 200  # the bot's newest actions its page shows
web = Blueprint("web", __name__, template_folder="templates", static_folder="static",
                static_url_path="/assets")

# Everything the page loads comes from this service; styles inline only because
# CodeMirror writes its own. Nothing user-made can run even if it slipped through.
PAGE_CSP = ("default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


class PassNames(BaseModel):
    """The pass names of each environment's TVM, as its workers found them."""

    environments: dict[str, list[str]] = Field(
        description="environment id -> pass names, for environments a worker has served")


def _service() -> JobService:
    found: JobService = current_app.extensions["tvmrepro"]
    return found


@cache
def examples() -> dict[str, dict[str, Any]]:
    """The example cases shipped with the package, by file stem (founding case first)."""
    folder = resources.files("service") / "static" / "examples"
    found = {}
    for item in sorted(folder.iterdir(), key=lambda p: (not p.name.startswith("tvm-"), p.name)):
        if item.name.endswith(".json"):
            found[item.name.removesuffix(".json")] = json.loads(item.read_text())
    return found


def _page(template: str, status: int = 200, **context: Any) -> Response:
    response = make_response(render_template(template, **context), status)
    response.headers["Content-Security-Policy"] = PAGE_CSP
    return response


@web.get("/")
def index() -> Response:
    """The editor: paste a case (or pick an example), pick environments, submit."""
    choices = [(name, case.get("title") or name) for name, case in examples().items()]
    caps = {"files": MAX_FILES, "file_bytes": MAX_FILE_BYTES, "all_bytes": MAX_FILES_BYTES,
            "file_mib": MAX_FILE_BYTES >> 20, "all_mib": MAX_FILES_BYTES >> 20}
    return _page("index.html", examples=choices, caps=caps)


@web.get("/jobs/<job_id>")
def job_page(job_id: str) -> Response:
    """A job's page: its matrix, logs, IR, diffs and report, updated while it runs."""
    job = _service().store.job(job_id, results=False)
    if job is None:
        return _page("missing.html", 404, job_id=job_id)
    # A triage's or sweep's page shows its answer; each part's runs are on its run job's page.
    return _page(KINDS[job.kind].template, job_id=job_id, title=job.title or f"job {job_id}")


@web.get("/github")
def bot_page() -> Response:
    """The GitHub bot's actions, newest first (what GET /api/v1/github/actions answers)."""
    rows, total = _service().store.actions(BOT_PAGE_ROWS)
    shown = [{**row, "at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row["at"]))}
             for row in rows]
    return _page("github.html", actions=shown, total=total,
                 configured=bool(_service().settings.github_webhook_secret))


@web.get("/api/v1/passes")
def pass_names() -> tuple[Response, int]:
    """The pass names each environment's TVM has, as its workers found them (for autocomplete)."""
    found = {env: sorted(data.get("passes") or [])
             for env, data in _service().store.fingerprints().items()}
    return jsonify(PassNames(environments=found).model_dump(mode="json")), 200
