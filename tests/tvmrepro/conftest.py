"""The store on both of its backends, for the store's own tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tvmrepro.store import Store


@pytest.fixture(params=("sqlite", "postgres"))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store with its tables: SQLite (whose one write lock every user shares) or
    PostgreSQL (the session's database of the test's own)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    else:
        url = request.getfixturevalue("clean_postgres")
    opened = Store(url, artifacts=tmp_path / "artifacts")
    opened.create_schema()
    yield opened
    opened.dispose()
