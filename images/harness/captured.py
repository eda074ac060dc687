"""What an imported model's entry was given and should have returned, as .npy files.

A frontend script's module exists only once the importer made it, and its inputs only in
the script: an extracted case carries both without the framework. After the script (in
extract mode, or on a path asked to capture), the last VM call of an imported entry that
references.py saw is written as a `captured` event: each input as the bytes of an .npy file
(base64), and the framework's outputs on those inputs likewise (a list where there are
several: a tuple's items in order). Nothing is written past CAP_BYTES in all: the event
says what was left out instead.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np

from .events import EventSink
from .references import References

CAP_BYTES = 16 << 20  # the case's files together stay within what a case may carry


def npy_bytes(array: Any) -> bytes:
    """An array as the bytes of an .npy file (no pickled objects)."""
    out = io.BytesIO()
    np.save(out, np.asarray(array), allow_pickle=False)
    return out.getvalue()


def _flat(value: Any) -> tuple[list[Any], bool]:
    """A framework's outputs as a list of arrays, and whether they were a list (a tuple)."""
    if isinstance(value, list | tuple):
        if all(not isinstance(item, list | tuple) for item in value):
            return list(value), True
        raise ValueError("nested outputs")
    return [value], False


def captured_fields(references: References) -> dict[str, Any] | None:
    """The last imported entry's call, its inputs and its reference, as .npy bytes in base64;
    None where no imported entry was called."""
    call = references.last
    if call is None:
        return None
    found: dict[str, Any] = {"params": call.imported.params[:len(call.inputs)], "left_out": []}
    files = [npy_bytes(array) for array in call.inputs]
    if sum(map(len, files)) > CAP_BYTES:
        return {**found, "inputs": [], "left_out": ["inputs"]}
    found["inputs"] = [base64.b64encode(data).decode() for data in files]
    try:
        outputs, several = _flat(references.reference_arrays) \
            if references.reference_arrays is not None else ([], False)
    except ValueError:
        outputs, several = [], False
        found["left_out"].append("reference (nested outputs)")
    saved = [npy_bytes(array) for array in outputs]
    if sum(map(len, files + saved)) > CAP_BYTES:
        saved = []
        found["left_out"].append("reference")
    found["reference"] = [base64.b64encode(data).decode() for data in saved]
    found["reference_tuple"] = several
    return found


def emit_captured(sink: EventSink, references: References | None) -> None:
    """The `captured` event, where an imported entry was called."""
    if references is None:
        return
    fields = captured_fields(references)
    if fields is not None:
        sink.emit("captured", **fields)
