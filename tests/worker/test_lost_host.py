"""Losing a worker host loses no job: two hosts on one machine, one killed or frozen mid-run.

Each host is a worker started under `unshare --uts` with a host name of its own (worker-a,
worker-b) and a TVMREPRO_HOME of its own (the session's provisioned environments linked in),
on the same Redis and PostgreSQL. A host's process tokens name it, so the other host cannot
judge its pids: only the lease of its heartbeats (worker_stale_s) tells the other that it is
gone. Each host runs one case at a time, so a job of a run per environment gives each host
exactly one (its one unacknowledged message).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV, OLD_ENV, REPO
from tests.service.stack import Backend, Stack, dump, founding_body, make_home, sleeping_script
from tvmrepro.environments import Environment
from tvmrepro.liveness import token_host
from tvmrepro.store import schema

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(180)]
STALE_S, INTERVAL_S = 6.0, 1.0  # the lease, and how often each host sweeps
LEASE = {"TVMREPRO_WORKER_STALE_S": str(STALE_S), "TVMREPRO_RECONCILE_INTERVAL_S": str(INTERVAL_S)}
# Past the lease plus two sweeps: what a loaded 2-core machine may add (no tight bound).
MARGIN_S = 15.0
# The time limit's rule alone would take a run back after its timeout_s (120 s) plus
# TVMREPRO_CLAIM_GRACE_S (the stack's 5 s); B claims it once its own run is done.
CLAIMED_WITHIN_S = 60.0
RUN_S = 4  # each run's sleep


class Host:
    """One worker host: a worker under a UTS namespace of its own, named `name`."""

    def __init__(self, stack: Stack, name: str, root: Path, test_home: Path) -> None:
        self.stack, self.name = stack, name
        self.home = make_home(root / name, test_home)
        env = {**stack.environ, "TVMREPRO_HOME": str(self.home), "TVMREPRO_WORKER_CONCURRENCY": "1"}
        command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', name,
                   sys.executable, "-m", "cli", "worker", "--env", OLD_ENV, "--env", NEW_ENV,
                   "--loglevel", "INFO"]
        with open(stack.home / f"{name}.log", "ab") as log:  # Stack.logs shows it on failure
            self.proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        stack.workers[name] = self.proc  # stopped with the stack

    def heartbeat_at(self) -> float | None:
        """When this host's worker last heartbeat (None before its first)."""
        with self.stack.store.engine.connect() as conn:
            rows = conn.execute(schema.workers.select()).mappings()
            beats = [r["heartbeat_at"] for r in rows if token_host(r["id"]) == self.name]
        return max(beats, default=None)

    def processes(self) -> set[int]:
        """Every process of this host: those in its UTS namespace and all their descendants
        (a sandbox has a namespace and a session of its own)."""
        uts = os.readlink(f"/proc/{self.proc.pid}/ns/uts")
        parents: dict[int, int] = {}
        found: set[int] = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2]
                                               .split()[1])
                if os.readlink(entry / "ns" / "uts") == uts:
                    found.add(int(entry.name))
        grown = True
        while grown:
            more = {pid for pid, parent in parents.items() if parent in found} - found
            found |= more
            grown = bool(more)
        return found

    def signal_all(self, signum: int) -> set[int]:
        """Send `signum` to every process of the host, again until no new one appears (one
        may fork while the others are signalled); the pids signalled."""
        done: set[int] = set()
        while fresh := self.processes() - done:
            for pid in fresh:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
            done |= fresh
        return done


@pytest.fixture
def hosts(clean_postgres: str, redis_prefix: str, tmp_path: Path, test_home: Path,
          tvm_envs: dict[str, Environment]) -> Iterator[tuple[Stack, Host, Host]]:
    """An API and two worker hosts, A and B, on Redis and PostgreSQL; all killed after."""
    from tests.fixtures.databases import REDIS_URL

    backend = Backend("redis+postgres", REDIS_URL, clean_postgres, redis_prefix)
    stack = Stack(backend, make_home(tmp_path / "api", test_home), **LEASE)
    started: list[Host] = []
    try:  # the hosts start while the API does (the store's schema is made already)
        started += [Host(stack, name, tmp_path, test_home) for name in ("worker-a", "worker-b")]
        stack.start_api()
        a, b = started
        stack._until(lambda: bool(a.heartbeat_at() and b.heartbeat_at()), "both hosts to heartbeat")
        yield stack, a, b
    finally:
        for host in started:
            if host.proc.poll() is None:
                host.signal_all(signal.SIGKILL)
        stack.close()


def run_of(stack: Stack, job_id: str, host: str) -> dict[str, Any] | None:
    """A running run of the job claimed by a process of `host`, as the store has it."""
    job = stack.store.job(job_id)
    for run in job.runs if job else []:
        if run.state == "running" and token_host(run.claimed_by) == host:
            return run.model_dump()
    return None


def held(stack: Stack, job_id: str, host: str) -> dict[str, Any]:
    """Wait until a process of `host` holds a running run of the job; its row."""
    found: list[dict[str, Any]] = []

    def holds() -> bool:
        found[:] = [run for run in [run_of(stack, job_id, host)] if run is not None]
        return bool(found)
    stack._until(holds, f"{host} to hold a run of job {job_id}")
    return found[0]


def taken_over(stack: Stack, job_id: str, run_id: str, by: str) -> dict[str, Any]:
    """Wait until `by` claimed the run (or stored it); its row."""
    def claimed() -> bool:
        row = stack.store.run(job_id, run_id)
        return row is not None and token_host(row.claimed_by) == by
    stack._until(claimed, f"{by} to take run {run_id}")
    row = stack.store.run(job_id, run_id)
    assert row is not None
    return row.model_dump()


def submit_two(stack: Stack, tag: str) -> dict[str, Any]:
    """A job of a sleeping script on both environments: a run for each host."""
    return stack.submit(founding_body(sleeping_script(RUN_S, tag), [OLD_ENV, NEW_ENV]))


def check_all_on(stack: Stack, job_id: str, host: str) -> dict[str, Any]:
    """The job is done, every run ran to `ok` on `host`, each with exactly one result."""
    done = stack.wait(job_id, timeout=90)
    assert done["status"] == "done", dump(done)
    assert {(r["host"], r["result"]["status"]) for r in done["runs"]} == {(host, "ok")}, dump(done)
    assert len(stack.result_rows(job_id)) == len(done["runs"]) == 2
    return done


def test_a_killed_host_loses_no_run(hosts: tuple[Stack, Host, Host]) -> None:
    stack, a, b = hosts
    job = submit_two(stack, "killed host")
    lost = held(stack, job["id"], a.name)
    held(stack, job["id"], b.name)  # each host has one
    a.signal_all(signal.SIGKILL)  # the whole host at once: nothing hands its run back
    killed_at = time.time()
    a.proc.wait()
    last_beat = a.heartbeat_at()
    assert last_beat is not None
    taken = taken_over(stack, job["id"], lost["id"], b.name)
    done = check_all_on(stack, job["id"], b.name)
    republished, claimed = taken["published_at"], taken["claimed_at"]
    print(f"\nlease {STALE_S:.0f} s, sweep {INTERVAL_S:.0f} s: republished "
          f"{republished - killed_at:.1f} s and claimed {claimed - killed_at:.1f} s after the kill "
          f"({republished - last_beat:.1f} s after the last heartbeat)")
    assert republished - last_beat >= STALE_S  # not before the lease ran out
    assert republished - killed_at < STALE_S + 2 * INTERVAL_S + MARGIN_S
    assert claimed - killed_at < CLAIMED_WITHIN_S
    again = next(r for r in done["runs"] if r["id"] == lost["id"])
    assert again["deliveries"] == 2, dump(again)


def test_a_frozen_host_that_comes_back_finishes_late_and_is_refused(
        hosts: tuple[Stack, Host, Host]) -> None:
    stack, a, b = hosts
    job = submit_two(stack, "frozen host")
    lost = held(stack, job["id"], a.name)
    held(stack, job["id"], b.name)
    frozen = a.signal_all(signal.SIGSTOP)  # it stops answering, as if cut from the network
    frozen_at = time.time()
    taken = taken_over(stack, job["id"], lost["id"], b.name)
    done = check_all_on(stack, job["id"], b.name)  # B ran it to the end while A was away
    republished, claimed = taken["published_at"], taken["claimed_at"]
    print(f"\nlease {STALE_S:.0f} s, sweep {INTERVAL_S:.0f} s: a frozen host's run republished "
          f"{republished - frozen_at:.1f} s and claimed {claimed - frozen_at:.1f} s after it froze")
    assert republished - frozen_at < STALE_S + 2 * INTERVAL_S + MARGIN_S
    a.signal_all(signal.SIGCONT)
    for pid in frozen:  # any the re-scan no longer finds (none should have left)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    log = stack.home / f"{a.name}.log"
    stack._until(lambda: "already had a result" in log.read_text(errors="replace"),
                 "host A's late finish to be refused")
    assert a.proc.poll() is None  # it came back and lives on
    assert len(stack.result_rows(job["id"])) == 2  # still one result per run
    again = stack.http.get(f"/api/v1/jobs/{job['id']}").json()
    assert [r["result"] for r in again["runs"]] == [r["result"] for r in done["runs"]]
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "ERROR/" not in text, text[-4000:]
