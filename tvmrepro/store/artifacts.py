"""The artifact store: values too large for a row (pass IR, logs, files, result data,
comparisons), in a folder every host shares, each once by its SHA-256.

A value of ARTIFACT_MIN_BYTES or more (a text's UTF-8 bytes, a JSON column's JSON text) is
written to `root/ab/<hex>` and its row keeps an empty value and the hex in a `*_ref` column
(tvmrepro/store/schema.py). A file is written to a temporary name and renamed into place, so
a reader never sees half of one and two hosts writing the same value at once write the same
bytes. Files no row names, older than GRACE_S (a write whose row is not committed yet is
younger), are removed by the retention sweep (tvmrepro/store/retention.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from tvmrepro.errors import ReproError

ARTIFACT_MIN_BYTES = 256 << 10
# An artifact file this young may belong to a row not committed yet: never taken as orphaned.
GRACE_S = 3600.0
_TEMP_PREFIX = ".tmp-"


class Stored(NamedTuple):
    """One artifact file: its digest, size in bytes and modification time."""

    digest: str
    size: int
    mtime: float


class ArtifactMissing(ReproError):
    """A row names an artifact that the artifact store's folder lacks (a folder not shared by
    every host, or one removed by hand)."""

    def __init__(self, digest: str, root: Path) -> None:
        super().__init__(f"artifact {digest} is missing from the artifact store {root} "
                         "(TVMREPRO_ARTIFACTS): every host must share that folder")
        self.digest, self.root = digest, root


def _is_digest(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


class Artifacts:
    """A folder of values by SHA-256 (hex), shared by every host of a deployment."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, digest: str) -> Path:
        """Where the value of `digest` lives."""
        return self.root / digest[:2] / digest

    def put(self, data: bytes) -> str:
        """Store `data` (once: a value held already only has its time renewed); its digest."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        try:
            os.utime(target)  # held: renewed, so the orphan sweep's grace starts again
            return digest
        except FileNotFoundError:
            pass
        self._shard(target.parent)
        handle, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=target.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp, 0o644)  # every host's processes read it, whatever their uid
            os.replace(temp, target)  # atomic: a reader sees the whole value or none
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return digest

    def _shard(self, folder: Path) -> None:
        """Make a shard folder writable by the group that shares the store (the API and the
        workers may run as different users of one group: its set-group-id bit keeps it)."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir()
        except FileExistsError:
            return
        os.chmod(folder, 0o2775)

    def read(self, digest: str) -> bytes:
        """The value of `digest`; ArtifactMissing naming it and the folder when it is missing."""
        try:
            return self.path(digest).read_bytes()
        except FileNotFoundError:
            raise ArtifactMissing(digest, self.root) from None

    def size(self, digest: str) -> int:
        """The size in bytes of the value of `digest` (0: missing)."""
        try:
            return self.path(digest).stat().st_size
        except FileNotFoundError:
            return 0

    def remove(self, digest: str) -> bool:
        """Delete the value of `digest`; whether there was one."""
        try:
            self.path(digest).unlink()
            return True
        except FileNotFoundError:
            return False

    def listing(self) -> Iterator[Stored]:
        """Every value held, with its size and time (unordered)."""
        for entry in self._files():
            if _is_digest(entry.name):
                try:
                    found = entry.stat()
                except FileNotFoundError:  # removed meanwhile (another host's sweep)
                    continue
                yield Stored(entry.name, found.st_size, found.st_mtime)

    def _files(self) -> Iterator[os.DirEntry[str]]:
        if not self.root.is_dir():
            return
        with os.scandir(self.root) as shards:
            for shard in shards:
                if shard.is_dir() and len(shard.name) == 2:
                    with os.scandir(shard.path) as files:
                        yield from files

    def remove_stale_temps(self, older_than: float) -> int:
        """Delete the temporary files of writes that died before `older_than`; how many."""
        removed = 0
        for entry in self._files():
            try:
                if entry.name.startswith(_TEMP_PREFIX) and entry.stat().st_mtime < older_than:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def remove_if_older(self, digest: str, older_than: float) -> bool:
        """Delete the value of `digest` unless it was written or renewed since `older_than`
        (a write racing the sweep renews it first)."""
        try:
            if self.path(digest).stat().st_mtime >= older_than:
                return False
        except FileNotFoundError:
            return False
        return self.remove(digest)

    # A column's value, in its row or here ----------------------------------------

    def spill_text(self, text: str) -> tuple[str, str | None]:
        """(the row's value, its ref): a large text goes here, the row keeps ""."""
        data = text.encode("utf-8", "surrogatepass")
        return ("", self.put(data)) if len(data) >= ARTIFACT_MIN_BYTES else (text, None)

    def spill_bytes(self, data: bytes) -> tuple[bytes, str | None]:
        """(the row's value, its ref): large bytes go here, the row keeps b""."""
        return (b"", self.put(data)) if len(data) >= ARTIFACT_MIN_BYTES else (data, None)

    def spill_json(self, value: Any, empty: Any) -> tuple[Any, str | None]:
        """(the row's value, its ref): a value whose JSON is large goes here, the row keeps
        `empty`."""
        text = json.dumps(value, separators=(",", ":"))
        if len(text.encode()) < ARTIFACT_MIN_BYTES:
            return value, None
        return empty, self.put(text.encode())

    def text(self, value: str, ref: str | None) -> str:
        """A text column's value, read from here when its row names a ref."""
        return value if ref is None else self.read(ref).decode("utf-8", "surrogatepass")

    def content(self, value: bytes, ref: str | None) -> bytes:
        """A binary column's value, read from here when its row names a ref."""
        return bytes(value) if ref is None else self.read(ref)

    def json(self, value: Any, ref: str | None) -> Any:
        """A JSON column's value, read from here when its row names a ref."""
        return value if ref is None else json.loads(self.read(ref))
