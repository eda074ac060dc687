"""A cache hit's latency in process: POST /api/v1/jobs of a case whose every run is stored.

The founding case, both variants, two environments: its four runs are run once for real
(the local runtime, real TVM IR) and stored as a worker would, on a fresh SQLite home; then
the same job is submitted again and again through Flask's test client, and each answer
(202, done, every run cached, comparisons included) is timed. Over HTTP, against a served
stack with a worker, the same measure is in bench/warm_ratios.py.

    .venv/bin/python bench/cache_hit.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.service_vs_bare import CASE  # noqa: E402
from service.app import create_app  # noqa: E402
from service.jobs import JobService  # noqa: E402
from tvmrepro.cases import parse_case  # noqa: E402
from tvmrepro.environments import default_catalog  # noqa: E402
from tvmrepro.jobs.settling import finish_run  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.environments.provision import provision  # noqa: E402
from worker.runner import run_variant, storable  # noqa: E402
from worker.runtimes import make_runtime  # noqa: E402

ENVS = ["tvm-0.25.0-cpu", "tvm-0.27.0.post1-cpu"]


def store_real_runs(settings: Settings, service: JobService, answer: dict[str, Any]) -> None:
    """Run each run of the job with the local runtime and store its result as a worker does."""
    case = parse_case(json.loads(CASE.read_text()))
    runtime = make_runtime("local", settings)
    for run in answer["runs"]:
        env = default_catalog().get(run["environment"])
        result = storable(run_variant(case, run["variant"], env, runtime, run["id"]))
        service.store.claim(run["id"], "bench:1", 3, 5.0, lambda _claimer: False)
        finish_run(service.store, answer["id"], run["id"], result)


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    tvm_settings = Settings.from_env()
    for env_id in ENVS:
        provision(tvm_settings, default_catalog().get(env_id))
    home = Path(tempfile.mkdtemp(prefix="tvmrepro-cache-hit-"))
    settings = Settings.from_env({"TVMREPRO_HOME": str(home)})
    app = create_app(settings)
    service: JobService = app.extensions["tvmrepro"]
    client = app.test_client()
    body = json.dumps({"case": json.loads(CASE.read_text()), "environments": ENVS,
                       "wait": True})  # no worker serves them here: the job waits, not 409

    def submit() -> dict[str, Any]:
        response = client.post("/api/v1/jobs", data=body, content_type="application/json")
        answer: dict[str, Any] = response.get_json()
        if response.status_code != 202:
            raise SystemExit(f"submit answered {response.status_code}: {answer}")
        return answer

    store_real_runs(tvm_settings, service, submit())
    submit()  # warm-up: the first hit pays its imports and the SQL compile caches
    samples = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        answer = submit()
        samples.append(time.perf_counter() - started)
        if answer["status"] != "done" or answer["cached_runs"] != len(answer["runs"]):
            raise SystemExit(f"not a cache hit: {answer['status']}, {answer['cached_runs']}")
    service.store.dispose()
    ms = [s * 1000 for s in samples]
    print(f"cache hit in process (founding case, 2 variants x 2 environments, SQLite), "
          f"{args.repeat} submits: median {statistics.median(ms):.1f} ms, "
          f"min {min(ms):.1f} ms, max {max(ms):.1f} ms")


if __name__ == "__main__":
    main()
