"""Slow clients that reconnect as soon as they are closed, against `tvmrepro serve` behind its
front (service/front.py) and without it (TVMREPRO_FRONT=0: gunicorn's threads face the
clients), side by side in one run.

Each attacker sends a request's headers a byte every 0.2 s from 127.0.0.2-5 and, once closed
(the read timeout, 10 s), connects again; meanwhile /healthz is asked from 127.0.0.1 every
0.1 s (the hostile suite's attack: tests/fixtures/slow_clients.py). Printed for each: how many
probes failed or took over 1 s, and the slowest answer. The API is served on a fresh home with
the embedded store, no worker.

    .venv/bin/python bench/slow_clients.py [--clients 16] [--seconds 40]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixtures.slow_clients import HEALTHY_S, siege  # noqa: E402  (the suite's attack)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(home: Path, port: int, front: bool) -> subprocess.Popen[bytes]:
    """`tvmrepro serve` on a home of its own, answering /healthz before this returns."""
    env = {**os.environ, "TVMREPRO_HOME": str(home), "TVMREPRO_FRONT": "1" if front else "0"}
    env.pop("REDIS_URL", None)
    env.pop("DATABASE_URL", None)
    api = subprocess.Popen([sys.executable, "-m", "cli", "serve", "--port", str(port)], cwd=REPO,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return api
        time.sleep(0.2)
    api.kill()
    raise SystemExit("the API did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    print(f"{args.clients} slow reconnecting clients for {args.seconds:g} s; /healthz every "
          f"0.1 s, bad = failed or over {HEALTHY_S:g} s")
    for front in (True, False):
        with tempfile.TemporaryDirectory() as home:
            port = free_port()
            api = serve(Path(home), port, front)
            try:
                seen = siege(f"http://127.0.0.1:{port}", args.clients, args.seconds)
            finally:
                api.terminate()
                api.wait(30)
        name = "behind the front" if front else "gunicorn alone  "
        print(f"  {name}: {seen.bad:3d} of {seen.probes} probes bad, slowest "
              f"{seen.slowest:.2f} s, {seen.reconnects} reconnects")


if __name__ == "__main__":
    main()
