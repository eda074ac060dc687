"""The blobs rows of the job store: the content of each file a case carries, once by its
SHA-256 (tvmrepro.attachments). Written when a job is submitted, read by the worker before it
runs the case; the bytes are kept and handed over as they came, never interpreted."""

from __future__ import annotations

import time
from collections.abc import Mapping

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase


def _insert_new(conn: Connection) -> sa.Insert:
    """An insert into blobs that skips a digest stored meanwhile (two submissions of one file
    at once on PostgreSQL; SQLite's writers take turns)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(t.blobs).on_conflict_do_nothing(index_elements=["sha256"])


class BlobRows(StoreBase):
    """The blobs table (part of `Store`)."""

    def put_blobs(self, blobs: Mapping[str, bytes]) -> int:
        """Store each content under its SHA-256 (the key: the caller computed it), those the
        store holds already left as they are; how many were new."""
        if not blobs:
            return 0
        # Large contents go to the artifact store first (named by the same digest), outside
        # the transaction: a file held already only has its time renewed.
        spilled = {digest: self.artifacts.spill_bytes(data) for digest, data in blobs.items()}
        now = time.time()
        with self._write() as conn:
            # Those held are renewed first: the retention sweep takes only blobs unnamed for
            # an hour, so it never takes one that this submission is about to name.
            wanted = t.blobs.c.sha256.in_(sorted(blobs))
            conn.execute(t.blobs.update().where(wanted).values(created_at=now))
            held = set(conn.execute(sa.select(t.blobs.c.sha256).where(wanted)).scalars())
            new = [{"sha256": digest, "size": len(blobs[digest]), "content": content,
                    "content_ref": ref, "created_at": now}
                   for digest, (content, ref) in spilled.items() if digest not in held]
            for row in new:  # one at a time: a statement of 32 MiB of parameters is enough
                conn.execute(_insert_new(conn), row)
        return len(new)

    def blobs(self, digests: list[str]) -> dict[str, bytes]:
        """The contents of these digests that the store holds."""
        if not digests:
            return {}
        query = (sa.select(t.blobs.c.sha256, t.blobs.c.content, t.blobs.c.content_ref)
                 .where(t.blobs.c.sha256.in_(sorted(set(digests)))))
        with self.engine.connect() as conn:
            rows = list(conn.execute(query))
        return {row.sha256: self.artifacts.content(row.content, row.content_ref) for row in rows}

    def blob_sizes(self) -> dict[str, int]:
        """Every stored digest and its size (what the store holds of files)."""
        with self.engine.connect() as conn:
            return {row.sha256: row.size for row in
                    conn.execute(sa.select(t.blobs.c.sha256, t.blobs.c.size))}
