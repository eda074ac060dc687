"""How far a script got: the order of a run's stages (docs/contract.md, `stage`), and the stage
a quoted traceback shows its error was raised in, so that a run's failure can be told to come
before the one a report quotes."""

from __future__ import annotations

import re

# A run's stages in the order a script reaches them. "import", "model" and "script" say
# nothing of how far TVM got (TVM not imported, the framework refused the model, no finer
# stage known): they are in no order.
_ORDER = {"frontend": 1, "parse": 2, "pass": 3, "build": 4, "vm_init": 5, "run": 6}
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+')
# What a script's own line calls, by the stage the harness names that call.
_CALLS = (
    ("frontend", re.compile(r"\bfrom_(?:onnx|exported_program|fx|pytorch|tflite|keras)\s*\(")),
    ("vm_init", re.compile(r"\bVirtualMachine\s*\(")),
    ("build", re.compile(r"\b(?:build|compile)\s*\(")),
    ("pass", re.compile(r"\btransform\.\w+\(|\bSequential\s*\(|\)\s*\(\s*mod\s*\)|\bseq\s*\(")),
    ("run", re.compile(r"\bvm\s*\[|\.invoke(?:_stateful)?\s*\(|\bvm\.\w+\s*\(")),
    ("parse", re.compile(r"\bir_module\b|\bfrom_source\s*\(|\bscript\.parse\b")),
)
# Where TVM's own frames are, when none of the script's lines says it.
_LIBRARY = (("parse", "/tvm/script/parser/"), ("frontend", "/relax/frontend/"),
            ("build", "vm_build.py"), ("vm_init", "relax/vm.py"))


def stage_rank(stage: str | None) -> tuple[int, int] | None:
    """A stage's place in a run ("pass:3:FuseTIR" after "pass:1:..."), None where in none."""
    if not stage:
        return None
    head, _, rest = stage.partition(":")
    if head not in _ORDER:
        return None
    index = rest.split(":", 1)[0]
    return _ORDER[head], int(index) if index.isdigit() else -1


def earlier(stage: str | None, than: str | None) -> bool:
    """Whether `stage` comes before `than` (two passes only by their indices, where both have
    one; a stage in no order comes before none)."""
    first, second = stage_rank(stage), stage_rank(than)
    if first is None or second is None:
        return False
    if first[0] != second[0]:
        return first[0] < second[0]
    return -1 not in (first[1], second[1]) and first[1] < second[1]


def traceback_stage(text: str) -> str | None:
    """The stage a quoted Python traceback's error was raised in: what the script's own frames
    (outermost first) call, else where TVM's frames are; None where it says neither."""
    lines = text.splitlines()
    frames = [(found.group("path"), lines[i + 1].strip() if i + 1 < len(lines) else "")
              for i, line in enumerate(lines) if (found := _FRAME.match(line))]
    own = [code for path, code in frames if "/tvm/" not in path and "site-packages" not in path]
    for code in own:
        for stage, call in _CALLS:
            if call.search(code):
                return stage
    paths = [path for path, _ in frames]
    for stage, part in _LIBRARY:
        if any(part in path for path in paths):
            return stage
    return None
