"""The case's files (a model, pickled inputs): written into the work directory, read-only,
under their names, before the case runs (its current directory is that directory).

The service checked each name; it is checked again here, as everything the harness is handed
is, so that no name can reach outside the directory. The harness never reads a file: a pickle
is loaded only by the case's own code, and a failure to load it is the case's error.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

READ_ONLY = 0o444


def _plain(name: Any) -> str:
    if not isinstance(name, str) or not name or name.startswith(".") or "/" in name \
            or "\0" in name or os.path.basename(name) != name:
        raise ValueError(f"not a plain file name: {name!r}")
    return name


def write_files(case: dict[str, Any], workdir: Path) -> list[str]:
    """Write the case's files into `workdir` (taken out of the case: their contents are not
    kept in memory while it runs); their names."""
    written = []
    for entry in case.pop("files", None) or []:
        name = _plain(entry.get("name"))
        data = base64.b64decode(entry.get("content") or "")
        path = workdir / name
        # O_EXCL and O_NOFOLLOW: a name that is there already (a link included) is refused.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, READ_ONLY)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(path, READ_ONLY)
        written.append(name)
        del data
    return written
