"""The results, logs and pass_ir rows of the job store: a run's result, stored once (a
conditional update: a redelivered message never gives a run a second result), its output and
the IR after each of its passes."""

from __future__ import annotations

import json
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import RowMapping

from tvmrepro.lifecycle import RunState
from tvmrepro.results import Result
from tvmrepro.store import schema as t
from tvmrepro.store.artifacts import Artifacts
from tvmrepro.store.base import StoreBase, changed
from tvmrepro.store.rows import RunRow

# A result whose data goes to the artifact store keeps in its row each of its keys whose JSON
# is smaller than this (its status, stage, signature...), so the row stays small.
SUMMARY_KEY_BYTES = 4096


def with_result() -> tuple[sa.Label[Any], sa.Label[Any]]:
    """The columns a read of runs adds for their result's data (`run_row` reads them)."""
    return t.results.c.data.label("result"), t.results.c.data_ref.label("result_ref")


def full_data(artifacts: Artifacts, data: dict[str, Any] | None,
              ref: str | None) -> dict[str, Any] | None:
    """A result's data as it was stored, read from the artifact store when its row keeps
    only a summary."""
    found: dict[str, Any] | None = artifacts.json(data, ref)
    return found


def run_row(artifacts: Artifacts, row: RowMapping) -> RunRow:
    """A run read with its result's data (`with_result`): the whole data, read from the
    artifact store where its row keeps a summary, so every view shows what was stored."""
    found = dict(row)
    ref = found.pop("result_ref", None)
    if ref is not None:
        found["result"] = full_data(artifacts, found.get("result"), ref)
    return RunRow.model_validate(found)


class ResultRows(StoreBase):
    """The results, logs and pass_ir tables (part of `Store`)."""

    def finish(self, run_id: str, result: Result) -> bool:
        """Store a run's result unless it already has one; True when this call stored it. A
        finished job's comparisons are the job layer's to make (tvmrepro.jobs.settling.finish_run)."""
        data = result.to_json()
        log = self._log_columns(data.pop("log"))
        passes = data.pop("passes")
        data["passes"] = [{k: v for k, v in p.items() if k != "ir"} for p in passes]
        data, data_ref = self._data_columns(data)
        irs = [self.artifacts.spill_text(p["ir"]) for p in passes]
        with self._write() as conn:
            stored = conn.execute(
                t.runs.update().where(t.runs.c.id == run_id, t.runs.c.state != RunState.DONE)
                .values(state=RunState.DONE.value, result_id=run_id, finished_at=time.time()))
            if stored.rowcount != 1:
                return False
            job_id = conn.execute(sa.select(t.runs.c.job_id)
                                  .where(t.runs.c.id == run_id)).scalar_one()
            conn.execute(t.results.insert().values(
                run_id=run_id, status=data["status"], stage=data["stage"],
                signature=data["signature"], data=data, data_ref=data_ref,
                created_at=time.time()))
            conn.execute(t.logs.insert().values(run_id=run_id, **log))
            if passes:
                conn.execute(t.pass_ir.insert(), [
                    {"run_id": run_id, "idx": p["index"], "name": p["name"],
                     "seconds": p["seconds"], "functions": p["functions"], "ir": ir,
                     "ir_ref": ref} for p, (ir, ref) in zip(passes, irs, strict=True)])
            changed(conn, [job_id])
        return True

    def _log_columns(self, log: dict[str, Any]) -> dict[str, Any]:
        """A log as its row holds it: a large stdout or stderr in the artifact store."""
        stdout, stdout_ref = self.artifacts.spill_text(log["stdout"])
        stderr, stderr_ref = self.artifacts.spill_text(log["stderr"])
        return {**log, "stdout": stdout, "stderr": stderr, "stdout_ref": stdout_ref,
                "stderr_ref": stderr_ref}

    def _data_columns(self, data: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """A result's data as its row holds it, and its ref: large data goes to the artifact
        store whole, and the row keeps its summary (its small keys: status, stage, signature
        and the like), bounded by SUMMARY_KEY_BYTES a key."""
        _, ref = self.artifacts.spill_json(data, None)
        if ref is None:
            return data, None
        return {key: value for key, value in data.items()
                if len(json.dumps(value)) < SUMMARY_KEY_BYTES}, ref

    def full_data(self, data: dict[str, Any] | None, ref: str | None) -> dict[str, Any] | None:
        """A result's data as it was stored, read from the artifact store when its row
        keeps only a summary."""
        return full_data(self.artifacts, data, ref)

    def result(self, result_id: str) -> dict[str, Any] | None:
        """The full stored result (log and every pass's IR included)."""
        query = (sa.select(t.results.c.data, t.results.c.data_ref)
                 .where(t.results.c.run_id == result_id))
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        data = self.full_data(row.data, row.data_ref) or {}
        return {**data, "passes": self.passes(result_id), "log": self.log(result_id)}

    def log(self, result_id: str) -> dict[str, Any] | None:
        """A run's stdout, stderr and whether they were cut."""
        query = sa.select(t.logs).where(t.logs.c.run_id == result_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return {"stdout": self.artifacts.text(row.stdout, row.stdout_ref),
                "stderr": self.artifacts.text(row.stderr, row.stderr_ref),
                "truncated": row.truncated}

    def passes(self, result_id: str) -> list[dict[str, Any]]:
        """A run's passes in order, each with the TVMScript after it."""
        query = (sa.select(t.pass_ir.c.idx.label("index"), t.pass_ir.c.name, t.pass_ir.c.seconds,
                           t.pass_ir.c.functions, t.pass_ir.c.ir, t.pass_ir.c.ir_ref)
                 .where(t.pass_ir.c.run_id == result_id).order_by(t.pass_ir.c.idx))
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(query).mappings()]
        for row in rows:
            row["ir"] = self.artifacts.text(row["ir"], row.pop("ir_ref"))
        return rows

    def job_ir_chars(self, job_id: str) -> int:
        """Characters of IR stored for the job's own runs (a cached run's IR is its first
        job's). An IR in the artifact store counts its UTF-8 bytes, read from its file's size
        (its characters for ASCII TVMScript; bounded: the job's IR cap holds at most
        JOB_IR_CAP / ARTIFACT_MIN_BYTES of them)."""
        own_runs = sa.select(t.runs.c.id).where(t.runs.c.job_id == job_id)
        in_rows = sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(t.pass_ir.c.ir)), 0)).where(
            t.pass_ir.c.run_id.in_(own_runs))
        refs = (sa.select(t.pass_ir.c.ir_ref, sa.func.count())
                .where(t.pass_ir.c.run_id.in_(own_runs), t.pass_ir.c.ir_ref.is_not(None))
                .group_by(t.pass_ir.c.ir_ref))
        with self.engine.connect() as conn:
            chars = int(conn.execute(in_rows).scalar_one())
            spilled = list(conn.execute(refs))
        return chars + sum(self.artifacts.size(ref) * int(n) for ref, n in spilled)
