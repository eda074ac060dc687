"""How fast the service says the broker is away, against the same answers with the broker up.

In process, on a fresh SQLite home: `broker_ping` and GET /healthz (Flask's test client)
with REDIS_URL on a port nobody listens on, interleaved with the same calls on a live Redis
(TVMREPRO_BENCH_REDIS_URL, the other benches' one; nothing is written there). A health check
that waited on kombu's retries would hang a load balancer's probe: with nobody listening the
answer should come about as fast as a refused connection, far inside BROKER_PING_S (the
tests once asked for /healthz under 30 s and broker_ping under 5 s).

    .venv/bin/python bench/broker_away.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.service_vs_bare import BENCH_REDIS_URL  # noqa: E402
from service.app import create_app  # noqa: E402
from tvmrepro.queue import BROKER_PING_S, broker_ping, make_celery  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402


def nobody_url() -> str:
    """A Redis URL on a port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


def timed(call: Callable[[], object]) -> float:
    """Seconds for one call; an exception (the broker away) is its answer."""
    started = time.perf_counter()
    with contextlib.suppress(Exception):  # refused is what is being timed
        call()
    return time.perf_counter() - started


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    cases = {"away": nobody_url(), "up": BENCH_REDIS_URL}
    for name, url in cases.items():
        settings = Settings.from_env({"TVMREPRO_HOME": tempfile.mkdtemp(prefix="tvmrepro-bench-"),
                                      "REDIS_URL": url})
        celery, client = make_celery(settings), create_app(settings).test_client()
        ping = functools.partial(broker_ping, celery)
        health = functools.partial(client.get, "/healthz")
        timed(health)  # warm-up: imports, the store's schema
        for _ in range(args.repeat):
            samples.setdefault(f"broker_ping, {name}", []).append(timed(ping))
            samples.setdefault(f"/healthz, {name}", []).append(timed(health))
    print(f"broker away (nobody listens) against up (Redis), {args.repeat} each, seconds"
          f" (BROKER_PING_S {BROKER_PING_S})")
    print(f"{'':<22} {'median':>8} {'max':>8} {'away/up':>8} {'max/ping_s':>11}")
    for call in ("broker_ping", "/healthz"):
        away, up = samples[f"{call}, away"], samples[f"{call}, up"]
        for name, seconds in (("away", away), ("up", up)):
            ratio = statistics.median(away) / statistics.median(up) if name == "away" else 1.0
            print(f"{call + ', ' + name:<22} {statistics.median(seconds):8.4f} {max(seconds):8.4f}"
                  f" {ratio:7.2f}x {max(seconds) / BROKER_PING_S:10.3f}x")


if __name__ == "__main__":
    main()
