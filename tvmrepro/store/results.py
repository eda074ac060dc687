"""The results, logs and pass_ir rows of the job store: a run's result, stored once (a
conditional update: a redelivered message never gives a run a second result), its output and
the IR after each of its passes."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from tvmrepro.lifecycle import RunState
from tvmrepro.results import Result
from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase, changed


class ResultRows(StoreBase):
    """The results, logs and pass_ir tables (part of `Store`)."""

    def finish(self, run_id: str, result: Result) -> bool:
        """Store a run's result unless it already has one; True when this call stored it. A
        finished job's comparisons are the job layer's to make (tvmrepro.jobs.settling.finish_run)."""
        data = result.to_json()
        log = data.pop("log")
        passes = data.pop("passes")
        data["passes"] = [{k: v for k, v in p.items() if k != "ir"} for p in passes]
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
                signature=data["signature"], data=data, created_at=time.time()))
            conn.execute(t.logs.insert().values(run_id=run_id, **log))
            if passes:
                conn.execute(t.pass_ir.insert(), [
                    {"run_id": run_id, "idx": p["index"], "name": p["name"],
                     "seconds": p["seconds"], "functions": p["functions"], "ir": p["ir"]}
                    for p in passes])
            changed(conn, [job_id])
        return True

    def result(self, result_id: str) -> dict[str, Any] | None:
        """The full stored result (log and every pass's IR included)."""
        with self.engine.connect() as conn:
            data = conn.execute(sa.select(t.results.c.data)
                                .where(t.results.c.run_id == result_id)).scalar_one_or_none()
        if data is None:
            return None
        full = {**data, "passes": self.passes(result_id), "log": self.log(result_id)}
        return full

    def log(self, result_id: str) -> dict[str, Any] | None:
        """A run's stdout, stderr and whether they were cut."""
        query = sa.select(t.logs.c.stdout, t.logs.c.stderr, t.logs.c.truncated).where(
            t.logs.c.run_id == result_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return dict(row) if row else None

    def passes(self, result_id: str) -> list[dict[str, Any]]:
        """A run's passes in order, each with the TVMScript after it."""
        query = (sa.select(t.pass_ir.c.idx.label("index"), t.pass_ir.c.name, t.pass_ir.c.seconds,
                           t.pass_ir.c.functions, t.pass_ir.c.ir)
                 .where(t.pass_ir.c.run_id == result_id).order_by(t.pass_ir.c.idx))
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def job_ir_chars(self, job_id: str) -> int:
        """Characters of IR stored for the job's own runs (a cached run's IR is its first
        job's)."""
        own_runs = sa.select(t.runs.c.id).where(t.runs.c.job_id == job_id)
        query = sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(t.pass_ir.c.ir)), 0)).where(
            t.pass_ir.c.run_id.in_(own_runs))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())
