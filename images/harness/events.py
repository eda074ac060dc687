"""The event channel from the harness to the runtime: JSON lines on a private descriptor.

The runtime opens the events file outside the sandbox and passes it as an
inherited descriptor (or, in a container, a path under /out). Events are
flushed one per line as they happen, so when the process is killed (signal,
timeout, out of memory) the runtime still knows the last stage and the passes
that completed. The final line is the "result" event.
"""

from __future__ import annotations

import json
import os
from typing import Any


class EventSink:
    """Writes events as JSON lines; survives user code closing or redirecting stdout."""

    def __init__(self, target: str) -> None:
        if target.startswith("fd:"):
            inherited = int(target[3:])
            # Move to a high descriptor and close the well-known one so user code
            # that writes to fd 3 (or closes it) cannot touch the channel.
            self._fd = os.dup(inherited)
            moved = os.dup2(self._fd, 1000 + os.getpid() % 500)
            os.close(self._fd)
            os.close(inherited)
            self._fd = moved
        else:
            self._fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.set_inheritable(self._fd, False)

    def emit(self, event: str, **fields: Any) -> None:
        """Write one event line immediately."""
        line = json.dumps({"event": event, **fields}, default=str) + "\n"
        data = line.encode()
        while data:
            written = os.write(self._fd, data)
            data = data[written:]
