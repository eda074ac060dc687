"""Serving the API with gunicorn (threads in a few processes; each process makes its own app).

gunicorn's threaded worker reads a request in the thread that answers it, and its `timeout`
is a heartbeat of the worker process, not a limit on a client: a client that sends its body a
byte at a time would hold a thread for as long as it likes, and a few such clients every
thread. Here each request must arrive whole (line, headers, body) within the read timeout
(TVMREPRO_READ_TIMEOUT_S) of its first byte, and every other blocking send or receive on a
client's connection gives up after that long too: a slow client holds a thread at most that
long, then its connection is closed (a body cut short is answered 408 first).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import TConn, ThreadWorker

from service.front import FRONT_CLIENT_HEADER
from service.waiting import STOPPING
from tvmrepro.settings import Settings

REQUEST_TIMEOUT_S = 60  # a request is short: the work happens in workers
# How long a stop waits for requests in progress (gunicorn's graceful_timeout, 30 s by default):
# requests are short and long-polls answer at once when the stop begins (STOPPING).
GRACEFUL_STOP_S = 3
PR_SET_PDEATHSIG = 1


class ReadTimeout(TimeoutError):
    """A client did not send its whole request within the read timeout."""


class DeadlineSocket(socket.socket):
    """A client's connection whose reads of one request end at a deadline, set by its first
    read (`start_request` clears it for the next request); no blocking call waits for ever."""

    read_timeout_s: float = 10.0
    deadline: float | None = None

    @classmethod
    def adopt(cls, sock: socket.socket, read_timeout_s: float) -> DeadlineSocket:
        """This class's socket on the same connection (the old object lets go of it)."""
        adopted = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        adopted.read_timeout_s = read_timeout_s
        return adopted

    def start_request(self) -> None:
        """A new request: its deadline starts with its first read."""
        self.deadline = None

    def setblocking(self, flag: bool) -> None:
        """Blocking means: for at most the read timeout at a time."""
        super().settimeout(self.read_timeout_s if flag else 0.0)

    def settimeout(self, value: float | None) -> None:
        """As socket.settimeout, but never without a bound."""
        super().settimeout(self.read_timeout_s if value is None else value)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        """socket.recv, giving up (ReadTimeout) at the request's deadline."""
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.read_timeout_s
        remaining = self.deadline - now
        if remaining <= 0:
            raise ReadTimeout(f"the request did not arrive within {self.read_timeout_s:g} s")
        before = self.gettimeout()
        if before != 0.0:  # a non-blocking read (the poller's) stays non-blocking
            super().settimeout(remaining if before is None else min(before, remaining))
        try:
            return super().recv(bufsize, flags)
        except TimeoutError:
            raise ReadTimeout(f"the request did not arrive within {self.read_timeout_s:g} s") \
                from None
        finally:
            super().settimeout(before)


class _QuietTimeouts(logging.Filter):
    """One line, not a traceback, for a connection closed because its request was too slow."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, ReadTimeout):
            record.msg, record.args = "closed a slow client's connection: %s", (exc,)
            record.exc_info, record.exc_text, record.levelno = None, None, logging.INFO
            record.levelname = "INFO"
        return True


class ReadTimeoutWorker(ThreadWorker):
    """gunicorn's threaded worker, its client connections made DeadlineSockets."""

    def init_process(self) -> None:
        """Quiet read timeouts in the error log, then run as gunicorn's threaded worker."""
        self.log.error_log.addFilter(_QuietTimeouts())
        super().init_process()

    def enqueue_req(self, conn: TConn) -> None:
        """Hand a connection to a thread; a new one becomes a DeadlineSocket first."""
        if not isinstance(conn.sock, DeadlineSocket):
            conn.sock = DeadlineSocket.adopt(conn.sock, self.app.settings.read_timeout_s)
        super().enqueue_req(conn)

    def handle_exit(self, sig: int, frame: Any) -> None:
        """SIGTERM, a graceful stop: the long-polls answer now rather than at their ends."""
        STOPPING.set()
        super().handle_exit(sig, frame)

    def handle(self, conn: TConn) -> Any:
        """One request of a connection, within its own read deadline."""
        if isinstance(conn.sock, DeadlineSocket):
            conn.sock.start_request()
        return super().handle(conn)


class Server(BaseApplication):
    """gunicorn running create_app(settings)."""

    def __init__(self, settings: Settings, host: str, port: int,
                 on_stop: Callable[[], None] | None = None, bind: str | None = None) -> None:
        # The app learns the address it serves from its settings (its Host allow-list), also
        # where its front listens there and gunicorn on a Unix socket (`bind`).
        self.settings = settings.model_copy(update={"host": host, "port": port})
        self.bind, self.on_stop = bind or f"{host}:{port}", on_stop
        super().__init__()

    def when_ready(self, arbiter: Any) -> None:
        """In gunicorn's master, once it serves: a stop signal calls `on_stop` first, so that
        what stops beside the API (`up`'s worker) stops while gunicorn waits for its own."""
        on_stop = self.on_stop
        if on_stop is None:
            return
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            previous = signal.getsignal(sig)
            if callable(previous):
                signal.signal(sig, _calling_first(on_stop, previous))

    def load_config(self) -> None:
        """Bind address, processes and threads from the settings."""
        options: dict[str, Any] = {
            "bind": self.bind,
            "workers": self.settings.api_workers,
            "threads": self.settings.api_threads,
            "worker_class": f"{__name__}.ReadTimeoutWorker",  # gthread with a read timeout
            "timeout": REQUEST_TIMEOUT_S,
            "graceful_timeout": GRACEFUL_STOP_S,
            "accesslog": None,
            "errorlog": "-",
            "proc_name": "tvmrepro-api",
            "when_ready": self.when_ready,
            # gunicornc's socket (at a fixed path in the user's home by default): unused here,
            # and one more way in to the service's processes.
            "control_socket_disable": True,
        }
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        """The WSGI app (called in each gunicorn process: its store and broker connections are
        the process's own)."""
        from service.app import create_app

        return create_app(self.settings)


def _calling_first(first: Callable[[], None], handler: Callable[..., Any]) -> Callable[..., Any]:
    def handle(signum: int, frame: Any) -> Any:
        first()
        return handler(signum, frame)

    return handle


def serve(settings: Settings, host: str | None = None, port: int | None = None,
          on_stop: Callable[[], None] | None = None) -> None:
    """Serve the API until stopped (blocks): behind its front (service/front.py) unless the
    settings turn it off; `on_stop` is called in the master when a stop signal comes, before
    gunicorn's own stop."""
    # The app's modules are imported once, here in gunicorn's master (nothing happens at their
    # import): each worker forked from it starts with them, not with three seconds of imports of
    # its own, at every start and every restart of a worker.
    import service.app  # noqa: F401

    host, port = host or settings.host, port if port is not None else settings.port
    if not settings.front:
        Server(settings, host, port, on_stop).run()
        return
    with started_front(settings, host, port) as backend:
        # gunicorn hears of each client from the front only, in the one header it trusts.
        behind = settings.model_copy(update={"client_header": FRONT_CLIENT_HEADER})
        Server(behind, host, port, on_stop, bind=f"unix:{backend}").run()


@contextlib.contextmanager
def started_front(settings: Settings, host: str, port: int) -> Iterator[Path]:
    """The front listening on host:port (bound here: a port in use is this process's error),
    in a process of its own that dies with this one; yields gunicorn's socket path."""
    listener = socket.create_server((host, port), family=_family(host), backlog=1024)
    private = Path(tempfile.mkdtemp(prefix="tvmrepro-api-"))  # 0700: the socket is the API's
    backend = private / "api.sock"
    args = [sys.executable, "-m", "service.front", "--fd", str(listener.fileno()),
            "--backend", str(backend), "--read-timeout", str(settings.read_timeout_s),
            "--max-request-bytes", str(settings.max_request_bytes),
            "--per-client", str(settings.front_client_connections),
            "--connections", str(settings.front_connections),
            "--client-header", settings.client_header]
    owner = os.getpid()
    front = subprocess.Popen(args, pass_fds=(listener.fileno(),), preexec_fn=_die_with_parent)
    listener.close()
    try:
        yield backend
    finally:
        # gunicorn's processes are forked from this one and unwind through here as they exit:
        # only the process that started the front stops it.
        if os.getpid() == owner:
            front.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                front.wait(GRACEFUL_STOP_S)
            front.kill()
            shutil.rmtree(private, ignore_errors=True)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _die_with_parent() -> None:
    # The front must not outlive the API even when the API is killed with no chance to stop it.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
