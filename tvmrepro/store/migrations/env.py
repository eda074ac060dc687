"""Alembic's entry point: run the migrations on the connection the store hands over."""

from __future__ import annotations

from alembic import context

from tvmrepro.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the store's migrations run through "
                       "tvmrepro.store.migrations.upgrade(connection)")
context.configure(connection=connection, target_metadata=metadata)
# The caller's transaction holds the lock: Alembic joins it instead of opening its own.
with context.begin_transaction():
    context.run_migrations()
