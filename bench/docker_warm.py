"""The Docker runtime, warm against cold, on a Docker engine (DOCKER_HOST's, else a private one).

A cold run creates a container whose supervisor imports TVM after it starts; a warm run takes
a container that the pool started ahead and that waits, TVM imported, for its case. Both are
timed from the runtime's call to the result (the founding case, one variant), interleaved.
Without DOCKER_HOST a private engine is started (scripts/dockerd, as root, as the tests do),
the stand-in base image imported and the environment's image built offline from the
wheelhouse under the home (the first time: a download of the pinned wheels); all of it is
stopped at the end.

    .venv/bin/python bench/docker_warm.py [--repeat 5] [--env ENV] [--variant NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.service_vs_bare import CASE  # noqa: E402
from tvmrepro.cases import parse_case  # noqa: E402
from tvmrepro.environments import Environment, default_catalog  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.environments.images import build_environment_image, fill_wheelhouse  # noqa: E402
from worker.runner import run_variant  # noqa: E402
from worker.runtimes.base import Limits  # noqa: E402
from worker.runtimes.docker import DockerRuntime, connect  # noqa: E402

BASE_IMAGE = "tvmrepro/stand-in-python:3.11-slim"
WARM_WAIT_S = 300


@contextmanager
def engine(settings: Settings, env: Environment) -> Iterator[Settings]:
    """Settings of an engine that has env's image: DOCKER_HOST's, else a private one."""
    if settings.docker_host or os.environ.get("DOCKER_HOST"):
        yield settings.model_copy(update={"docker_host": settings.docker_host
                                          or os.environ["DOCKER_HOST"]})
        return
    root = Path(tempfile.mkdtemp(prefix="tbd-", dir="/tmp"))  # a socket path is short
    scripts = REPO / "scripts"
    started = subprocess.run([str(scripts / "dockerd"), "start", str(root), "--bridge=none"],
                             capture_output=True, text=True, check=True)
    host = started.stdout.strip()
    try:
        subprocess.run([str(scripts / "base-image"), BASE_IMAGE, str(settings.home / "base-images")],
                       check=True, capture_output=True, env={**os.environ, "DOCKER_HOST": host})
        private = settings.model_copy(update={"docker_host": host})
        wheelhouse = settings.home / "wheelhouse"
        fill_wheelhouse([env], wheelhouse)
        build_environment_image(connect(private), private, env, wheelhouse, BASE_IMAGE)
        yield private
    finally:
        subprocess.run([str(scripts / "dockerd"), "stop", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)


def time_run(runtime: DockerRuntime, env: Environment, variant: str, warm: bool) -> float:
    """Seconds for one run of the case through `runtime` (after its warm container is up)."""
    if warm:
        assert runtime.warm.pool is not None
        key, deadline = (env.id, Limits.pooled(runtime.settings)), time.monotonic() + WARM_WAIT_S
        while runtime.warm.pool.count(key) < 1:
            if time.monotonic() > deadline:
                raise SystemExit("no warm container came up")
            time.sleep(0.05)
    case = parse_case(json.loads(CASE.read_text()))
    started = time.perf_counter()
    result = run_variant(case, variant, env, runtime)
    elapsed = time.perf_counter() - started
    if result.isolation.get("warm") is not warm or result.status.value == "infra_error":
        raise SystemExit(f"not a {'warm' if warm else 'cold'} run: {result.message}")
    return elapsed


def measure(settings: Settings, env: Environment, variant: str, repeat: int) -> dict[str, list[float]]:
    """Interleaved cold and warm runs on an engine with env's image."""
    samples: dict[str, list[float]] = {"cold": [], "warm": []}
    with engine(settings, env) as on_engine:
        cold = DockerRuntime(on_engine.model_copy(update={"warm_sandboxes": 0}))
        warm = DockerRuntime(on_engine.model_copy(update={"warm_sandboxes": 1}))
        warm.prewarm([env])
        try:
            time_run(cold, env, variant, False)  # the engine's and the image's first start
            for _ in range(repeat):
                samples["cold"].append(time_run(cold, env, variant, False))
                samples["warm"].append(time_run(warm, env, variant, True))
        finally:
            # The last run's replacement is let finish first: the engine stops right after.
            deadline = time.monotonic() + WARM_WAIT_S
            while warm.warm.pool is not None and any(warm.warm.pool.starting.values()) \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            warm.close()
    return samples


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="tvm-0.27.0.post1-cpu")
    parser.add_argument("--variant", default="fusetir-once")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    samples = measure(Settings.from_env(), default_catalog().get(args.env), args.variant,
                      args.repeat)
    cold, warm = (statistics.median(samples[k]) for k in ("cold", "warm"))
    print(f"Docker runtime, founding case, variant {args.variant}, {args.env}, {args.repeat} "
          f"runs each (medians): cold {cold:.3f} s, warm {warm:.3f} s, warm/cold {warm / cold:.2f}x")


if __name__ == "__main__":
    main()
