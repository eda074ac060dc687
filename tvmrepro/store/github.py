"""The GitHub bot's rows of the job store: the webhook deliveries it took (a replay is refused by
its id), its state per issue under a lease, the jobs it watches, the leader of each flood of one
signature, and the log of its actions. The state is the bot's own JSON (tvmrepro/bot/state.py):
the store keeps and hands it back, and decides nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase

ACTION_FIELDS = ("id", "at", "repo", "number", "action", "detail", "http_status")


class GitHubRows(StoreBase):
    """The github_* tables (part of `Store`)."""

    def take_delivery(self, delivery_id: str, event: str, action: str | None) -> bool:
        """Record a webhook delivery; False where its id was taken before (a replay)."""
        try:
            with self._write() as conn:
                conn.execute(t.github_deliveries.insert().values(
                    delivery_id=delivery_id, event=event, action=action, received_at=time.time()))
        except sa.exc.IntegrityError:
            return False
        return True

    def bot_issue(self, repo: str, number: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """An issue's inbox and state (None: an issue the bot never took)."""
        query = sa.select(t.github_issues.c.inbox, t.github_issues.c.state).where(
            t.github_issues.c.repo == repo, t.github_issues.c.number == number)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return (row.inbox, row.state) if row is not None else None

    def bot_issues(self, repo: str) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        """Every issue of `repo` the bot took, by number, with its inbox and state."""
        query = (sa.select(t.github_issues.c.number, t.github_issues.c.inbox,
                           t.github_issues.c.state)
                 .where(t.github_issues.c.repo == repo).order_by(t.github_issues.c.number))
        with self.engine.connect() as conn:
            return [(int(row.number), row.inbox, row.state) for row in conn.execute(query)]

    def update_bot_inbox(self, repo: str, number: int,
                         change: Callable[[dict[str, Any] | None], dict[str, Any]]
                         ) -> dict[str, Any]:
        """Change an issue's inbox in one transaction (the row locked: two deliveries for one
        issue change it one after the other); the inbox `change` made of the old one (None: a
        new issue)."""
        key = (t.github_issues.c.repo == repo) & (t.github_issues.c.number == number)
        for attempt in range(2):  # another delivery may make a new issue's row meanwhile
            try:
                with self._write() as conn:
                    old = conn.execute(sa.select(t.github_issues.c.inbox).where(key)
                                       .with_for_update()).scalar_one_or_none()
                    inbox = change(old)
                    if old is None:
                        conn.execute(t.github_issues.insert().values(
                            repo=repo, number=number, inbox=inbox, state={},
                            updated_at=time.time()))
                    else:
                        conn.execute(t.github_issues.update().where(key).values(
                            inbox=inbox, updated_at=time.time()))
                return inbox
            except sa.exc.IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def save_bot_state(self, repo: str, number: int, state: dict[str, Any]) -> None:
        """Keep what the follow-up of an issue did (its row exists: the inbox made it)."""
        key = (t.github_issues.c.repo == repo) & (t.github_issues.c.number == number)
        with self._write() as conn:
            conn.execute(t.github_issues.update().where(key).values(
                state=state, updated_at=time.time()))

    def lease_bot_issue(self, repo: str, number: int, token: str, seconds: float) -> bool:
        """Take the issue's lease for `seconds` unless another holder's is still running."""
        now = time.time()
        key = (t.github_issues.c.repo == repo) & (t.github_issues.c.number == number)
        free = sa.or_(t.github_issues.c.lease.is_(None), t.github_issues.c.lease_until < now,
                      t.github_issues.c.lease == token)
        with self._write() as conn:
            taken = conn.execute(t.github_issues.update().where(key & free).values(
                lease=token, lease_until=now + seconds)).rowcount
        return bool(taken)

    def release_bot_issue(self, repo: str, number: int, token: str) -> None:
        """Give the lease back (only the holder's is given back)."""
        key = ((t.github_issues.c.repo == repo) & (t.github_issues.c.number == number)
               & (t.github_issues.c.lease == token))
        with self._write() as conn:
            conn.execute(t.github_issues.update().where(key).values(lease=None, lease_until=None))

    def watch_job(self, job_id: str, repo: str, numbers: list[int]) -> None:
        """The bot answers these issues from the job once it is done."""
        with self._write() as conn:
            known = set(conn.execute(sa.select(t.github_jobs.c.number).where(
                t.github_jobs.c.job_id == job_id, t.github_jobs.c.repo == repo)).scalars())
            new = sorted(set(numbers) - known)
            if new:
                conn.execute(t.github_jobs.insert(), [
                    {"job_id": job_id, "repo": repo, "number": n, "created_at": time.time()}
                    for n in new])

    def watchers(self, job_id: str) -> list[tuple[str, int]]:
        """The issues (repo, number) the bot answers from this job."""
        query = (sa.select(t.github_jobs.c.repo, t.github_jobs.c.number)
                 .where(t.github_jobs.c.job_id == job_id).order_by(t.github_jobs.c.number))
        with self.engine.connect() as conn:
            return [(repo, int(number)) for repo, number in conn.execute(query)]

    def flood_leader(self, repo: str, signature: str, number: int, window_s: float) -> int:
        """The issue that leads the reports of `signature` (its SHA-256): the one that took it
        within the last `window_s` seconds, else `number`, which takes it now."""
        now = time.time()
        key = (t.github_floods.c.repo == repo) & (t.github_floods.c.signature == signature)
        for _ in range(3):  # another may insert it between the read and the insert
            with self._write() as conn:
                row = conn.execute(sa.select(t.github_floods.c.leader, t.github_floods.c.started_at)
                                   .where(key)).first()
                if row is not None and row.started_at >= now - window_s:
                    return int(row.leader)
                if row is not None:
                    conn.execute(t.github_floods.update().where(key).values(
                        leader=number, started_at=now))
                    return number
            try:
                with self._write() as conn:
                    conn.execute(t.github_floods.insert().values(
                        repo=repo, signature=signature, leader=number, started_at=now))
                return number
            except sa.exc.IntegrityError:
                continue
        raise RuntimeError(f"no leader of flood {signature[:12]} in {repo}")

    def log_action(self, repo: str | None, number: int | None, action: str, detail: str,
                   http_status: int | None = None) -> None:
        """One line of the bot's log."""
        with self._write() as conn:
            conn.execute(t.github_actions.insert().values(
                at=time.time(), repo=repo, number=number, action=action, detail=detail[:2000],
                http_status=http_status))

    def actions(self, limit: int, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """A page of the bot's log, newest first, and how many lines it has."""
        columns = [t.github_actions.c[name] for name in ACTION_FIELDS]
        query = (sa.select(*columns).order_by(t.github_actions.c.id.desc())
                 .limit(limit).offset(offset))
        with self.engine.connect() as conn:
            rows = [dict(row) for row in conn.execute(query).mappings()]
            total = conn.execute(sa.select(sa.func.count()).select_from(t.github_actions))
            return rows, int(total.scalar_one())
