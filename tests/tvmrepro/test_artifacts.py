"""The artifact store under the job store (real SQLite and PostgreSQL, a real folder): large
values leave their rows and read back whole, and retention removes old jobs with their rows,
files and artifacts, keeping what a kept job still shows or names."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.tvmrepro.job_rows import CAP, never_gone, new_job
from tvmrepro.api.views import CellRef, Comparison
from tvmrepro.lifecycle import RunState
from tvmrepro.results import Result, Status
from tvmrepro.settings import Settings
from tvmrepro.store import Store
from tvmrepro.store import schema as t
from tvmrepro.store.artifacts import ARTIFACT_MIN_BYTES, ArtifactMissing, Artifacts
from tvmrepro.store.jobs import CacheRemoved
from tvmrepro.store.rows import JobRow, RunRow

MIB = 1 << 20
DAY_S = 86400.0
# Two hours from now: what was written in this test is past the artifacts' one-hour grace, and
# a job made now is well within a day's retention.
LATER = 2 * 3600.0


def big_result(ir: str = "", stdout: str = "", outputs: object = None) -> Result:
    """An error result whose one pass printed `ir` and whose run printed `stdout`."""
    return Result.model_validate({
        "environment": "e", "variant": "script", "status": Status.ERROR, "stage": "pass:0:P",
        "signature": "TVMError at P", "message": "boom", "outputs": outputs,
        "passes": [{"index": 0, "name": "P", "seconds": 0.1, "functions": [], "ir": ir}],
        "log": {"stdout": stdout, "stderr": "err"}})


def finished_job(store: Store, result: Result, key: str | None = None,
                 case: dict[str, Any] | None = None) -> tuple[JobRow, RunRow]:
    """A job of one run, stored and finished with `result`."""
    job, (run,) = new_job(1, key=key or uuid.uuid4().hex)
    if case is not None:
        job = job.model_copy(update={"case": case})
    store.submit(job, [run], cap=CAP)
    store.claim(run.id, "h:1", 3, 5.0, never_gone)
    assert store.finish(run.id, result)
    return job, run


def cached_job(store: Store, source: RunRow) -> JobRow:
    """A job of one run served from `source`'s result by the cache."""
    job, (run,) = new_job(1, key=source.cache_key)
    run = run.model_copy(update={"state": RunState.DONE, "cached": True,
                                 "result_id": source.id, "finished_at": time.time()})
    store.submit(job, [run], cap=CAP)
    return job


def age(store: Store, job: JobRow, days: float) -> None:
    """Make `job` as old as `days` days, its runs finished then too."""
    then = time.time() - days * DAY_S
    with store.write() as conn:
        conn.execute(t.jobs.update().where(t.jobs.c.id == job.id).values(created_at=then))
        conn.execute(t.runs.update().where(t.runs.c.job_id == job.id).values(finished_at=then))


def longest_value(store: Store) -> tuple[int, str]:
    """The longest value any column of any row holds, and where."""
    found = (0, "")
    with store.engine.connect() as conn:
        for table in t.metadata.sorted_tables:
            for column in table.columns:
                value = (column if isinstance(column.type, (sa.Text, sa.String, sa.LargeBinary))
                         else sa.cast(column, sa.Text))
                length = conn.execute(sa.select(sa.func.max(sa.func.length(value)))).scalar()
                found = max(found, (int(length or 0), f"{table.name}.{column.name}"))
    return found


def comparison(diff: str) -> Comparison:
    """A comparison of two cells whose diff is `diff`."""
    return Comparison(a=CellRef(variant="a", environment="e"),
                      b=CellRef(variant="b", environment="e"), identical=False, diff=diff)


def files_of(store: Store) -> set[str]:
    """The digests the artifact store's folder holds."""
    return {found.digest for found in store.artifacts.listing()}


def test_large_values_leave_their_rows_and_read_back_whole(store: Store) -> None:
    ir, stdout = "I" * (3 * MIB), "O" * (3 * MIB)
    outputs = [list(range(100_000))]  # a result's data over the threshold
    job, run = finished_job(store, big_result(ir, stdout, outputs))
    blob = bytes(range(256)) * (20 * MIB // 256)
    digest = hashlib.sha256(blob).hexdigest()
    assert store.put_blobs({digest: blob}) == 1
    diff = "-a\n+b\n" * (MIB // 3)
    store.store_comparisons(job.id, ([comparison(diff)], []), runs=1)

    assert [p["ir"] for p in store.passes(run.id)] == [ir]
    log = store.log(run.id)
    assert log is not None and (log["stdout"], log["stderr"]) == (stdout, "err")
    full = store.result(run.id)
    assert full is not None
    assert (full["outputs"], full["passes"][0]["ir"], full["message"]) == (outputs, ir, "boom")
    assert store.blobs([digest]) == {digest: blob}
    read = store.job(job.id)
    assert read is not None and read.comparisons is not None
    assert read.comparisons[0].diff == diff
    assert read.runs[0].result is not None and read.runs[0].result["outputs"] == outputs
    assert store.runs_of_jobs([job.id])[job.id][0].result == read.runs[0].result
    assert store.job_ir_chars(job.id) == len(ir)
    length, where = longest_value(store)
    assert length < MIB, where
    with store.engine.connect() as conn:  # the row keeps the summary the views sort by
        data = conn.execute(sa.select(t.results.c.data)).scalar_one()
    assert (data["status"], data["signature"], "outputs" in data) == ("error", "TVMError at P",
                                                                       False)
    assert len(files_of(store)) == 5  # the IR, the log, the data, the blob, the comparisons


def test_a_value_below_the_threshold_stays_in_its_row(store: Store) -> None:
    _, run = finished_job(store, big_result("i" * (ARTIFACT_MIN_BYTES - 1)))
    assert files_of(store) == set()
    assert store.passes(run.id)[0]["ir"] == "i" * (ARTIFACT_MIN_BYTES - 1)


def test_a_missing_artifact_is_a_clear_error(store: Store) -> None:
    _, run = finished_job(store, big_result("I" * ARTIFACT_MIN_BYTES))
    (digest,) = files_of(store)
    assert store.artifacts.remove(digest)
    with pytest.raises(ArtifactMissing) as raised:
        store.passes(run.id)
    assert digest in str(raised.value) and str(store.artifacts.root) in str(raised.value)


def test_retention_removes_an_old_job_with_its_rows_files_and_artifacts(store: Store) -> None:
    own, shared = b"x" * ARTIFACT_MIN_BYTES, b"y" * ARTIFACT_MIN_BYTES
    digests = {hashlib.sha256(data).hexdigest(): data for data in (own, shared)}
    old_case = {"script": "pass", "files": [{"name": "a", "sha256": d, "size": len(data)}
                                           for d, data in digests.items()]}
    store.put_blobs(digests)
    old, old_run = finished_job(store, big_result("O" * MIB, "S" * MIB), case=old_case)
    store.store_comparisons(old.id, ([comparison("d" * MIB)], []), runs=1)
    shared_digest = hashlib.sha256(shared).hexdigest()
    kept_case = {"script": "pass", "files": [{"name": "b", "sha256": shared_digest,
                                              "size": len(shared)}]}
    kept, kept_run = finished_job(store, big_result("K" * MIB), case=kept_case)
    age(store, old, 10)
    old_files = files_of(store) - files_of_run(store, kept_run) - {shared_digest}
    later = time.time() + LATER
    young_orphan = store.artifacts.put(b"z" * 10)  # a write whose row is not stored yet...
    os.utime(store.artifacts.path(young_orphan), (later - 60, later - 60))  # ...as the sweep runs

    found = store.prune(DAY_S, now=later)
    assert (found.jobs, found.blobs) == (1, 1)
    assert store.job(old.id) is None and store.job(kept.id) is not None
    assert rows_naming(store, old.id, old_run.id) == []
    assert store.blob_sizes() == {shared_digest: len(shared)}
    assert files_of(store) & old_files == set()
    assert files_of_run(store, kept_run) <= files_of(store)  # still named: kept
    assert {shared_digest, young_orphan} <= files_of(store)
    assert store.passes(kept_run.id)[0]["ir"] == "K" * MIB


def files_of_run(store: Store, run: RunRow) -> set[str]:
    """The artifacts a run's pass IR rows name."""
    with store.engine.connect() as conn:
        return set(conn.execute(sa.select(t.pass_ir.c.ir_ref).where(
            t.pass_ir.c.run_id == run.id, t.pass_ir.c.ir_ref.is_not(None))).scalars())


def rows_naming(store: Store, job_id: str, run_id: str) -> list[str]:
    """'table.column' of every row that names the job or its run."""
    found = []
    with store.engine.connect() as conn:
        for table in t.metadata.sorted_tables:
            for column in table.columns:
                if (column.name in ("id", "job_id", "run_id", "result_id", "run_job")
                        and isinstance(column.type, sa.String)):
                    query = sa.select(sa.func.count()).where(column.in_([job_id, run_id]))
                    if conn.execute(query).scalar_one():
                        found.append(f"{table.name}.{column.name}")
    return found


def test_a_job_whose_results_a_kept_job_shows_stays(store: Store) -> None:
    source_job, source = finished_job(store, big_result("C" * ARTIFACT_MIN_BYTES))
    newer = cached_job(store, source)
    age(store, source_job, 10)
    later = time.time() + LATER
    assert store.expired_jobs(DAY_S, later) == []
    assert store.remove_jobs([source_job.id]) == ([], set())  # asked outright: kept too
    assert store.prune(DAY_S, now=later).jobs == 0
    assert store.passes(source.id)[0]["ir"] == "C" * ARTIFACT_MIN_BYTES
    age(store, newer, 5)  # the job that showed it is old too: both go, the newer first
    assert store.expired_jobs(DAY_S, later) == [newer.id, source_job.id]
    assert store.prune(DAY_S, now=later).jobs == 2
    assert files_of(store) == set()


def test_two_hosts_pruning_at_once_is_harmless(store: Store) -> None:
    jobs = [finished_job(store, big_result("P" * ARTIFACT_MIN_BYTES + str(n)))[0]
            for n in range(4)]
    for job in jobs:
        age(store, job, 10)
    errors: list[BaseException] = []

    def prune() -> None:
        try:
            store.prune(DAY_S, now=time.time() + LATER)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=prune) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [store.job(job.id) for job in jobs] == [None] * 4 and files_of(store) == set()


def test_a_submission_served_from_a_removed_result_is_refused(store: Store) -> None:
    job, run = finished_job(store, big_result())
    store.remove_jobs([job.id])
    with pytest.raises(CacheRemoved):
        cached_job(store, run)


def test_retention_is_off_by_default_and_read_from_the_environment(tmp_path: Path) -> None:
    assert (Settings(home=tmp_path).retention_days, Settings(home=tmp_path).artifacts_dir) == (
        0.0, tmp_path / "artifacts")
    read = Settings.from_env({"TVMREPRO_ARTIFACTS": str(tmp_path / "shared"),
                              "TVMREPRO_RETENTION_DAYS": "30"})
    assert (read.artifacts_dir, read.retention_days) == (tmp_path / "shared", 30.0)
    stored = Artifacts(tmp_path / "a")
    assert stored.put(b"v") == stored.put(b"v") == hashlib.sha256(b"v").hexdigest()
    assert [(f.size, f.digest) for f in stored.listing()] == [(1, hashlib.sha256(b"v").hexdigest())]


def test_the_sweeps_prune_runs_at_most_hourly_and_only_when_retention_is_on(store: Store) -> None:
    job, _ = finished_job(store, big_result())
    age(store, job, 10)
    assert store.prune_when_due(0) is None  # off: nothing removed
    assert store.job(job.id) is not None
    found = store.prune_when_due(1.0)
    assert found is not None and found.jobs == 1 and store.job(job.id) is None
    assert store.prune_when_due(1.0) is None  # within the hour: not again
