"""A container's streams: its stdin written once, its attach stream (stdout and stderr, capped)
read, and its files read back through the engine's archives."""

from __future__ import annotations

import io
import tarfile
import threading
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import requests.exceptions

from worker.runtimes.base import CappedOutput


class ChunkReader(io.RawIOBase):
    """A file over an iterator of byte chunks, for tarfile's stream mode."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.pending = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            self.pending = next(self.chunks, b"")
            if not self.pending:
                return 0
        size = min(len(buffer), len(self.pending))
        buffer[:size], self.pending = self.pending[:size], self.pending[size:]
        return size


class OutputReader(threading.Thread):
    """Drains a container's attach stream, keeping the first `cap` bytes of stdout and stderr."""

    def __init__(self, stream: Any, cap: int) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.outputs = (CappedOutput(cap), CappedOutput(cap))  # stdout, stderr

    def run(self) -> None:
        """Read until the container's streams close."""
        try:
            for frames in self.stream:
                for output, chunk in zip(self.outputs, frames, strict=True):
                    if chunk:
                        output.keep(chunk)
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            pass  # the container was removed under the stream: what we have is what there is

    @property
    def truncated(self) -> bool:
        """Whether either stream was cut."""
        return any(output.truncated for output in self.outputs)

    def text(self, index: int) -> str:
        """stdout (0) or stderr (1) as kept, decoded."""
        return self.outputs[index].text()


def write_stdin(api: docker.APIClient, container_id: str, data: bytes) -> None:
    """Write `data` to a container's stdin through an attach socket, then close it."""
    sock = api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
    raw = getattr(sock, "_sock", sock)
    try:
        raw.sendall(data)
    finally:
        # Closing the file object docker-py hands back leaves its socket open (until the
        # garbage collector finds it): close both.
        sock.close()
        raw.close()


def read_archived(api: docker.APIClient, container_id: str, path: str, cap: int) -> bytes:
    """A file of the container, read back through the engine: at most `cap` bytes (none if
    the file is not there)."""
    try:
        chunks, _ = api.get_archive(container_id, path)
    except docker.errors.NotFound:
        return b""
    stream = iter(chunks)
    try:
        with tarfile.open(fileobj=io.BufferedReader(ChunkReader(stream)), mode="r|") as tar:
            member = next(iter(tar), None)
            handle = tar.extractfile(member) if member else None
            data = handle.read(cap) if handle else b""
    finally:
        getattr(stream, "close", lambda: None)()  # the rest, past the cap, is not read
    return data
