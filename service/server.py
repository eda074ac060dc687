"""Serving the API with gunicorn (threads in a few processes; each process makes its own app)."""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication

from tvmrepro.settings import Settings

REQUEST_TIMEOUT_S = 60  # a request is short: the work happens in workers


class Server(BaseApplication):
    """gunicorn running create_app(settings)."""

    def __init__(self, settings: Settings, host: str, port: int) -> None:
        # The app learns the address it is bound to from its settings (its Host allow-list).
        self.settings = settings.model_copy(update={"host": host, "port": port})
        self.host, self.port = host, port
        super().__init__()

    def load_config(self) -> None:
        """Bind address, processes and threads from the settings."""
        options: dict[str, Any] = {
            "bind": f"{self.host}:{self.port}",
            "workers": self.settings.api_workers,
            "threads": self.settings.api_threads,
            "worker_class": "gthread",
            "timeout": REQUEST_TIMEOUT_S,
            "accesslog": None,
            "errorlog": "-",
            "proc_name": "tvmrepro-api",
        }
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        """The WSGI app (called in each gunicorn process)."""
        from service.app import create_app

        return create_app(self.settings)


def serve(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    """Serve the API until stopped (blocks)."""
    Server(settings, host or settings.host, port or settings.port).run()
