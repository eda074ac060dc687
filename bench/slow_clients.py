"""Slow clients that reconnect as soon as they are closed, against `tvmrepro serve` behind its
front (service/front.py) and without it (TVMREPRO_FRONT=0: gunicorn's threads face the
clients), side by side in one run.

Each attacker sends a request's headers a byte every 0.2 s from 127.0.0.2-5 and, once closed
(the read timeout, 10 s), connects again; meanwhile /healthz is asked from 127.0.0.1 every
0.25 s with a 1 s timeout. Printed for each: how many probes failed or took over 1 s, and the
slowest answer. The API is served on a fresh home with the embedded store, no worker.

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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
HEALTHY_S = 1.0


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


def attacker(port: int, source: str, done: threading.Event) -> None:
    """Headers a byte at a time; reconnect at once when closed."""
    while not done.is_set():
        with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", port), timeout=5, source_address=(source, 0)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            sock.settimeout(0.2)
            while not done.is_set():
                try:
                    if not sock.recv(4096):
                        break
                except TimeoutError:
                    sock.sendall(b"x")


def attack(port: int, clients: int, seconds: float) -> tuple[int, int, float]:
    """(probes, probes failed or over HEALTHY_S, slowest probe) while `clients` attack."""
    done = threading.Event()
    probes, bad, slowest = 0, 0, 0.0
    with ThreadPoolExecutor(clients) as pool:
        for n in range(clients):
            pool.submit(attacker, port, f"127.0.0.{2 + n % 4}", done)
        time.sleep(1.0)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                ok = httpx.get(f"http://127.0.0.1:{port}/healthz",
                               timeout=HEALTHY_S).status_code == 200
            except httpx.TransportError:
                ok = False
            took = time.monotonic() - started
            probes, slowest = probes + 1, max(slowest, took)
            bad += not ok or took > HEALTHY_S
            time.sleep(0.25)
        done.set()
    return probes, bad, slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    print(f"{args.clients} slow reconnecting clients for {args.seconds:g} s; /healthz every "
          f"0.25 s, bad = failed or over {HEALTHY_S:g} s")
    for front in (True, False):
        with tempfile.TemporaryDirectory() as home:
            port = free_port()
            api = serve(Path(home), port, front)
            try:
                probes, bad, slowest = attack(port, args.clients, args.seconds)
            finally:
                api.terminate()
                api.wait(30)
        name = "behind the front" if front else "gunicorn alone  "
        print(f"  {name}: {bad:3d} of {probes} probes bad, slowest {slowest:.2f} s")


if __name__ == "__main__":
    main()
