"""GET /metrics: the service's gauges in Prometheus' text format, read from the store and the
broker at each scrape (docs/deployment.md#metrics says what each one means).

The API runs in several gunicorn processes, and the workers on other hosts: a counter kept in one
process would count that process only. Every figure here is read at scrape time from what all
of them share, the store and the broker, so whichever process answers, the answer is the same.
A part whose source is away is left out and `tvmrepro_metrics_source_up` says so; the scrape
itself still answers 200.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator

from flask import Blueprint, Response, current_app
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)

from service.jobs import JobService
from tvmrepro.queue import SHORT_RUN_S, broker_queue_lengths, queue_names
from tvmrepro.results import Status
from tvmrepro.store.metrics import (
    LONG,
    SHORT,
    Timings,
    blob_bytes,
    database_bytes,
    live_workers,
    recent_timings,
    status_totals,
    unfinished_counts,
)

log = logging.getLogger(__name__)
METRICS_PATH = "/metrics"
# The durations and waits are those of the runs that finished within this window.
RECENT_WINDOW_S = 3600.0
WAIT_BOUNDS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 21600.0, 86400.0)
DURATION_BOUNDS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
LANES = (SHORT, LONG)

metrics = Blueprint("metrics", __name__)


def _gauge(name: str, text: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, labels=list(labels))


class ServiceCollector:
    """A prometheus_client collector of the figures the store and the broker hold."""

    def __init__(self, service: JobService) -> None:
        self.service = service
        self.environments = [env.id for env in service.catalog.environments]

    def collect(self) -> Iterator[Metric]:
        """Every family, each source read once; one that fails is left out and marked down."""
        started = time.monotonic()
        up = _gauge("tvmrepro_metrics_source_up", "1 if the source answered this scrape, "
                    "else 0 (its figures are left out)", ["source"])
        for source, part in (("store", self._store), ("broker", self._broker)):
            families = self._guarded(source, part)
            up.add_metric([source], 0.0 if families is None else 1.0)
            yield from families or []
        yield up
        took = _gauge("tvmrepro_scrape_duration_seconds", "how long this scrape's reads took")
        took.add_metric([], time.monotonic() - started)
        yield took

    @staticmethod
    def _guarded(source: str, part: Callable[[], list[Metric]]) -> list[Metric] | None:
        try:
            return part()
        except Exception:
            log.exception("GET /metrics: the %s did not answer", source)
            return None

    def _store(self) -> list[Metric]:
        store, stale_s = self.service.store, self.service.settings.worker_stale_s
        return [*self._unfinished(unfinished_counts(store, SHORT_RUN_S)),
                self._totals(status_totals(store)),
                *self._timings(), *self._workers(live_workers(store, time.time() - stale_s)),
                *self._bytes()]

    def _unfinished(self, counts: dict[tuple[str, str, str], int]) -> list[Metric]:
        queued = _gauge("tvmrepro_queued_runs", "runs stored and waiting for a worker to claim "
                        "them, per environment and lane (the store's count)",
                        ["environment", "lane"])
        running = _gauge("tvmrepro_running_runs", "runs a worker has claimed and not finished, "
                         "per environment and lane", ["environment", "lane"])
        envs = sorted({*self.environments, *(env for env, _, _ in counts)})
        for env in envs:
            for lane in LANES:
                queued.add_metric([env, lane], counts.get((env, lane, "queued"), 0))
                running.add_metric([env, lane], counts.get((env, lane, "running"), 0))
        return [queued, running]

    @staticmethod
    def _totals(totals: dict[str, int]) -> Metric:
        family = CounterMetricFamily("tvmrepro_runs", "runs ended with a result of their own "
                                     "(run by a worker, or ended by the service), by its "
                                     "status, since the store was made; cache hits not counted",
                                     labels=["status"])
        for status in sorted({*(s.value for s in Status), *totals}):
            family.add_metric([status], totals.get(status, 0))
        return family

    def _timings(self) -> list[Metric]:
        since = time.time() - RECENT_WINDOW_S
        found = recent_timings(self.service.store, since, WAIT_BOUNDS, DURATION_BOUNDS)
        window = _gauge("tvmrepro_recent_window_seconds", "the window of the queue wait and "
                        "run duration histograms: runs finished within it")
        window.add_metric([], RECENT_WINDOW_S)
        return [window,
                _histogram("tvmrepro_queue_wait_seconds", "from a run's submission to its "
                           "last claim by a worker", found.wait, WAIT_BOUNDS),
                _histogram("tvmrepro_run_duration_seconds", "from a run's last claim by a "
                           "worker to its result stored", found.duration, DURATION_BOUNDS)]

    def _workers(self, live: tuple[int, dict[str, int]]) -> list[Metric]:
        total, by_env = live
        alive = _gauge("tvmrepro_workers_alive", "workers whose heartbeat is fresh "
                       "(within TVMREPRO_WORKER_STALE_S)")
        alive.add_metric([], total)
        serving = _gauge("tvmrepro_environment_workers", "live workers serving each environment",
                         ["environment"])
        for env in sorted({*self.environments, *by_env}):
            serving.add_metric([env], by_env.get(env, 0))
        return [alive, serving]

    def _bytes(self) -> list[Metric]:
        stored = _gauge("tvmrepro_store_bytes", "the store's database size on disk, as the "
                        "database reports it")
        stored.add_metric([], database_bytes(self.service.store))
        count, size = blob_bytes(self.service.store)
        blobs = _gauge("tvmrepro_blob_bytes", "bytes of the files cases carry, each content "
                       "once (part of the store's size)")
        blobs.add_metric([], size)
        files = _gauge("tvmrepro_blobs", "distinct file contents stored")
        files.add_metric([], count)
        held = [value.size for value in self.service.store.artifacts.listing()]
        artifacts = _gauge("tvmrepro_artifact_bytes", "bytes of the values kept in the artifact "
                           "store instead of their rows (TVMREPRO_ARTIFACTS)")
        artifacts.add_metric([], sum(held))
        values = _gauge("tvmrepro_artifacts", "values kept in the artifact store")
        values.add_metric([], len(held))
        return [stored, blobs, files, artifacts, values]

    def _broker(self) -> list[Metric]:
        names = {name: (env, lane) for env in self.environments
                 for name, lane in zip(queue_names(env), LANES, strict=True)}
        lengths = broker_queue_lengths(self.service.celery, names)
        if lengths is None:  # the embedded broker: the store's counts are the queue
            return []
        family = _gauge("tvmrepro_broker_queue_messages", "messages waiting in each Redis "
                        "queue (what KEDA's Redis scaler reads)",
                        ["queue", "environment", "lane"])
        for name, length in sorted(lengths.items()):
            family.add_metric([name, *names[name]], length)
        return [family]


def _histogram(name: str, text: str, found: dict[str, Timings],
               bounds: tuple[float, ...]) -> Metric:
    """A gauge histogram (it rises and falls as runs enter and leave the window), per
    environment."""
    family = GaugeHistogramMetricFamily(name, f"{text}, over the runs a worker ran that "
                                        "finished within the recent window", labels=["environment"])
    for env, timings in sorted(found.items()):
        buckets = [(f"{bound:g}", float(n)) for bound, n in zip(bounds, timings.buckets,
                                                                strict=True)]
        family.add_metric([env], [*buckets, ("+Inf", float(timings.count))],
                          gsum_value=timings.total_s)
    return family


def metrics_registry(service: JobService) -> CollectorRegistry:
    """A registry of this service's collector alone: no per-process figures (a process's own
    memory or CPU would differ from one gunicorn process to the next)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector(service))
    return registry


@metrics.get(METRICS_PATH)
def scrape() -> Response:
    """The figures, in Prometheus' text format."""
    registry: CollectorRegistry = current_app.extensions["tvmrepro.metrics"]
    return Response(generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)
