"""Files a case carries beside its code (an ONNX model, pickled inputs, a reference output).

On submit each file comes whole, `{"name": "model.onnx", "content": "<base64>"}`. The store keeps
its content once, by SHA-256 (tvmrepro/store/blobs.py); the stored case keeps only `{name,
sha256, size}`, and those are part of its cache key. The worker fetches the contents by digest
before a run, and the harness writes each file into the run's work directory (its current
directory), read-only, under its name, before the case runs. Nothing here or in the worker
interprets a file: a pickle is only ever loaded by the case itself, inside its sandbox.

A case's files are dumped without their contents (a stored case, a view, a cache key, an
answer): only a dump given the context WITH_CONTENTS carries them (the harness's request, a
submission).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from tvmrepro.errors import BadInput
from tvmrepro.settings import MAX_FILE_BYTES, MAX_FILE_NAME, MAX_FILES, MAX_FILES_BYTES

if TYPE_CHECKING:
    from tvmrepro.cases import Case

# The serialization context of a dump that carries the files' contents.
WITH_CONTENTS = {"attachments": "contents"}
# The names the harness gives the case's own code in the work directory
# (images/harness/modes.py, reduce_module.py, scriptsrc.py): a file may not take them.
_HARNESS_NAMES = re.compile(r"(repro|case_module|printed_module|printed_\d+|candidate_\d+)\.py")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SPACE = re.compile(r"\s+")
# Looks up contents by SHA-256 (the store's blobs); a digest it lacks is left out.
Contents = Callable[[list[str]], Mapping[str, bytes]]


def mib(size: int) -> str:
    """A size in MiB, as the caps are said."""
    return f"{size / (1 << 20):.4g} MiB"


def name_problem(name: str) -> str | None:
    """Why `name` is not a plain file name a run's work directory can hold, or None."""
    if not name:
        return "empty"
    if len(name) > MAX_FILE_NAME:
        return f"{len(name)} characters, over the cap of {MAX_FILE_NAME}"
    if "/" in name or "\\" in name:
        return "holds a '/' or '\\': a plain file name, not a path"
    if ".." in name:
        return "holds '..'"
    if name.startswith("."):
        return "starts with '.'"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "holds a control character"
    if _HARNESS_NAMES.fullmatch(name):
        return "is a name the harness gives the case's own code"
    return None


def decoded(content: str) -> bytes:
    """A file's base64 content as bytes (whitespace, as `base64` wraps lines, ignored);
    ValueError naming the cap it is over, or why it is not base64."""
    text = _SPACE.sub("", content) if _SPACE.search(content) else content
    if len(text) > 4 * -(-MAX_FILE_BYTES // 3):  # said before decoding a flood
        raise ValueError(f"about {mib(len(text) * 3 // 4)}, over the cap of "
                         f"{mib(MAX_FILE_BYTES)} a file")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64 (the standard alphabet, padded): {exc}") from exc
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{len(data)} bytes, over the cap of {mib(MAX_FILE_BYTES)} a file")
    return data


class Attachment(BaseModel):
    """A file beside the case's code: written read-only into the run's work directory (its
    current directory) under its name before the case runs."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(description=f"a plain file name (no '/', no '..', no leading '.', at most "
                                  f"{MAX_FILE_NAME} characters), unique in the case")
    content: str | None = Field(default=None, description="the file, in base64: required on "
                                f"submit (at most {mib(MAX_FILE_BYTES)} decoded); a stored "
                                "case has none")
    sha256: str | None = Field(default=None, description="its SHA-256, hex: set from `content`")
    size: int | None = Field(default=None, ge=0, description="its size in bytes: set from "
                                                             "`content`")

    @field_validator("name")
    @classmethod
    def _plain(cls, value: str) -> str:
        if (problem := name_problem(value)) is not None:
            raise ValueError(f"{value[:MAX_FILE_NAME]!r} is not a plain file name: {problem}")
        return value

    @field_validator("content")
    @classmethod
    def _base64(cls, value: str | None) -> str | None:
        if value is not None:
            decoded(value)
        return value

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is not None and not _SHA256.fullmatch(value):
            raise ValueError("not a SHA-256 in lower-case hex (64 digits)")
        return value

    @model_validator(mode="after")
    def _digest(self) -> Attachment:
        if self.content is None:
            if self.sha256 is None or self.size is None:
                raise ValueError(f"{self.name!r}: give its content (base64)")
            return self
        data = self.data()
        digest = hashlib.sha256(data).hexdigest()
        if self.sha256 not in (None, digest) or self.size not in (None, len(data)):
            raise ValueError(f"{self.name!r}: its sha256 or size is not its content's "
                             f"({digest}, {len(data)} bytes)")
        self.sha256, self.size = digest, len(data)
        return self

    # No return annotation: pydantic then documents the dump as the model's own fields.
    @model_serializer(mode="wrap")
    def _without_content(self, handler: SerializerFunctionWrapHandler,
                         info: SerializationInfo):
        data: dict[str, Any] = handler(self)
        if info.context != WITH_CONTENTS:
            data.pop("content", None)
        return data

    def data(self) -> bytes:
        """The content's bytes (ValueError: it has none here)."""
        if self.content is None:
            raise ValueError(f"the content of {self.name!r} is not at hand")
        return decoded(self.content)

    @property
    def digest(self) -> str:
        """Its SHA-256 (always set once validated)."""
        assert self.sha256 is not None
        return self.sha256

    @classmethod
    def of(cls, name: str, data: bytes) -> Attachment:
        """A file named `name` holding `data`."""
        return cls.model_validate({"name": name, "content": base64.b64encode(data).decode()})


def check_files(files: list[Attachment], field: str = "files") -> list[Attachment]:
    """The files of one case, within the caps together and named once each; BadInput naming
    the field (a name given twice: the second, `files[2].name`)."""
    if len(files) > MAX_FILES:
        raise BadInput(field, f"{len(files)} files, over the cap of {MAX_FILES}")
    total = sum(f.size or 0 for f in files)
    if total > MAX_FILES_BYTES:
        raise BadInput(field, f"{mib(total)} in all, over the cap of {mib(MAX_FILES_BYTES)}")
    seen: dict[str, int] = {}
    for index, found in enumerate(files):
        if found.name in seen:
            raise BadInput(f"{field}[{index}].name", f"{found.name!r} is given twice (also "
                                                     f"{field}[{seen[found.name]}]): names are unique")
        seen[found.name] = index
    return files


def too_many(value: Any) -> Any:
    """A files list refused before its items are decoded, when it has too many."""
    if isinstance(value, list) and len(value) > MAX_FILES:
        raise BadInput("files", f"{len(value)} files, over the cap of {MAX_FILES}")
    return value


def without_contents(case: Case) -> Case:
    """The case as it is stored: each file its name, digest and size only."""
    if not case.files:
        return case
    return case.model_copy(update={"files": [f.model_copy(update={"content": None})
                                             for f in case.files]})


def contents_of(case: Case) -> dict[str, bytes]:
    """The contents the case carries, by SHA-256 (for the store)."""
    return {f.digest: f.data() for f in case.files if f.content is not None}


def with_contents(case: Case, lookup: Contents) -> Case:
    """The case with every file's content, those it lacks looked up by digest (the store's);
    BadInput naming a file that `lookup` does not hold (or holds other bytes for)."""
    wanted = [f.digest for f in case.files if f.content is None]
    if not wanted:
        return case
    found = lookup(sorted(set(wanted)))
    files = []
    for index, entry in enumerate(case.files):
        if entry.content is None:
            data = found.get(entry.digest)
            if data is None or hashlib.sha256(data).hexdigest() != entry.digest:
                raise BadInput(f"files[{index}]", f"{entry.name!r}: no content with sha256 "
                                                  f"{entry.digest} is at hand")
            entry = entry.model_copy(update={"content": base64.b64encode(data).decode()})
        files.append(entry)
    return case.model_copy(update={"files": files})


def require_contents(case: Case) -> None:
    """BadInput naming the first file whose content is not at hand (a stored case's, run
    without the store: give the file again)."""
    for index, entry in enumerate(case.files):
        if entry.content is None:
            raise BadInput(f"files[{index}]", f"{entry.name!r}: its content is not given (a "
                                              "stored case names it by sha256 only); give the "
                                              "file (--file PATH)")


def read_files(paths: Iterable[Path], field: str = "--file") -> list[Attachment]:
    """Files read from `paths`, each named by its file name; BadInput naming a missing one."""
    files = []
    for path in paths:
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise BadInput(field, f"{path}: no such file") from exc
        except OSError as exc:
            raise BadInput(field, f"{path}: cannot read: {exc.strerror or exc}") from exc
        if len(data) > MAX_FILE_BYTES:
            raise BadInput(field, f"{path}: {mib(len(data))}, over the cap of "
                                  f"{mib(MAX_FILE_BYTES)} a file")
        try:
            files.append(Attachment.of(path.name, data))
        except ValidationError as exc:
            raise BadInput(field, f"{path}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") \
                from exc
    return files


def attach(case: Case, files: list[Attachment], field: str = "--file") -> Case:
    """The case with `files` added (one of a name it has already replaces it)."""
    if not files:
        return case
    names = {f.name for f in files}
    merged = [f for f in case.files if f.name not in names] + files
    return case.model_copy(update={"files": check_files(merged, field)})
