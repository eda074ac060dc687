"""The Flask application factory: nothing happens at import time."""

from __future__ import annotations

from flask import Flask

from service.api import api, check_host, health, register_errors, secure_headers
from service.github import github
from service.hosts import AllowedHosts
from service.jobs import JobService
from service.metrics import metrics, metrics_registry
from service.web import web
from tvmrepro.settings import Settings


def create_app(settings: Settings | None = None) -> Flask:
    """The API for these settings (default: read from the environment)."""
    settings = settings or Settings.from_env()
    app = Flask("tvmrepro")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]  # keep the models' field order
    app.extensions["tvmrepro"] = JobService.open(settings)
    app.extensions["tvmrepro.hosts"] = AllowedHosts.of(settings)
    app.extensions["tvmrepro.metrics"] = metrics_registry(app.extensions["tvmrepro"])
    app.before_request(check_host)  # before anything else: a foreign Host gets nothing
    app.register_blueprint(api)
    app.register_blueprint(health)
    app.register_blueprint(metrics)  # GET /metrics, for Prometheus (docs/deployment.md)
    app.register_blueprint(github)  # the GitHub bot's webhook and log (docs/bot.md)
    app.register_blueprint(web)  # the pages: / and /jobs/<id>
    register_errors(app)
    app.after_request(secure_headers)
    return app
