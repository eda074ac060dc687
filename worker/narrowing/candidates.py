"""Candidate reductions of a module's TVMScript, as text: functions, statements, values, shapes.

The text is the module as TVM printed it (harness/scriptsrc.py): imports, then
`class Module:` with its functions at four spaces. Every edit here is plain
text and may well break the module; that is fine: a candidate counts only once
the harness has parsed it and found it well formed on the environment's TVM
(harness/reduce_module.py), and only then is it run. Candidates come in a
fixed order for a given text (the reducer resumes at an index after accepting
one), largest edits first within each group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FUNCTION_INDENT = 4
STATEMENT_STEP = 4
_DEF = re.compile(r"^\s*def (\w+)\(")
# A binding whose type is a tensor of known rank: `name: R.Tensor((dims), dtype="x") = value`.
_ANNOTATED = re.compile(r'^(\s+)(\w+): R\.Tensor\(\(([^()]*)\), dtype="(\w+)"\) = (.+)$')
# The same type given as the output type of a call_tir-like call: `name = R.call_tir(..., out_ty=...)`.
_OUT_TYPE = re.compile(r'^(\s+)(\w+) = (R\.\w+\(.*out_(?:ty|sinfo)=R\.Tensor\(\(([^()]*)\), '
                       r'dtype="(\w+)"\)\))$')
_SHAPE_CONTEXTS = (
    re.compile(r"(R\.Tensor\(\()([^()]*)(\))"),
    re.compile(r"(R\.shape\(\[)([^\[\]()]*)(\])"),
    re.compile(r"(T\.(?:Buffer|alloc_buffer|match_buffer)\(\()([^()]*)(\))"),
    re.compile(r"(T\.grid\()([^()]*)(\))"),
    re.compile(r"(\brange\()([^()]*)(\))"),  # a PrimFunc's loop over a buffer's extent
)
_INT64 = re.compile(r"T\.int64\((\d+)\)")


@dataclass(frozen=True)
class Candidate:
    """One edit of the module text: what it does, in words, and the text it gives."""

    what: str
    source: str


def indent_of(line: str) -> int:
    """Leading spaces of a line."""
    return len(line) - len(line.lstrip(" "))


def _class_line(lines: list[str]) -> int:
    return next((i for i, line in enumerate(lines) if line.startswith("class ")), len(lines))


def _block_end(lines: list[str], start: int, end: int) -> int:
    """End (exclusive) of the statement at `start`: its decorated def and everything nested."""
    indent = indent_of(lines[start])
    j = start + 1
    if lines[start].lstrip().startswith("@"):  # decorators, then the def they decorate
        while j < end and indent_of(lines[j]) == indent and not _DEF.match(lines[j]):
            j += 1
        j += 1
    while j < end and (not lines[j].strip() or indent_of(lines[j]) > indent):
        j += 1
    while j > start + 1 and not lines[j - 1].strip():  # trailing blank lines stay
        j -= 1
    return j


def function_spans(lines: list[str]) -> list[tuple[str, int, int]]:
    """(name, first line, end) of each function of the module class, decorators included."""
    spans = []
    i = _class_line(lines) + 1
    while i < len(lines):
        line = lines[i]
        if line.strip() and indent_of(line) == FUNCTION_INDENT and not line.lstrip().startswith("#"):
            end = _block_end(lines, i, len(lines))
            name = next((m.group(1) for m in map(_DEF.match, lines[i:end]) if m), "?")
            spans.append((name, i, end))
            i = end
        else:
            i += 1
    return spans


def _join(lines: list[str]) -> str:
    return "\n".join(lines).rstrip("\n") + "\n"


def _without(lines: list[str], spans: list[tuple[int, int]]) -> str:
    drop = {i for start, end in spans for i in range(start, end)}
    return _join([line for i, line in enumerate(lines) if i not in drop])


def drop_functions(source: str) -> list[Candidate]:
    """Each function of the module, dropped."""
    lines = source.splitlines()
    return [Candidate(f"drop function {name}", _without(lines, [(start, end)]))
            for name, start, end in function_spans(lines)]


def statement_groups(lines: list[str], depth: int) -> list[list[tuple[int, int]]]:
    """Runs of sibling statements at indentation `depth` inside functions, as (start, end) spans."""
    groups: list[list[tuple[int, int]]] = []
    for _name, start, end in function_spans(lines):
        current: list[tuple[int, int]] = []
        i = start
        while i < end:
            line = lines[i]
            if not line.strip() or line.lstrip().startswith("#") or indent_of(line) > depth:
                i += 1
                continue
            if indent_of(line) < depth:  # a parent line: the siblings before it are one run
                if current:
                    groups.append(current)
                current = []
                i += 1
                continue
            block_end = _block_end(lines, i, end)
            current.append((i, block_end))
            i = block_end
        if current:
            groups.append(current)
    return groups


def _chunks(group: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Halves, quarters, ... of a run of statements (largest first), then each one alone."""
    found: list[list[tuple[int, int]]] = []
    size = len(group) // 2
    while size >= 2:
        found += [group[k:k + size] for k in range(0, len(group), size)]
        size //= 2
    return found + [[span] for span in group]


# What a PrimFunc's body keeps when the rest goes: the buffers and variables its signature binds
# (match_buffer, shape variables) and its attributes.
_PRIM_KEEP = re.compile(r"^\s*(?:\w+ = T\.(?:match_buffer\(|int\d+\(\)|float\d+\(\))|T\.func_attr\()")
_EMPTY_BODY = "T.evaluate(0)"


def empty_prim_funcs(source: str) -> list[Candidate]:
    """Each PrimFunc's body made `T.evaluate(0)`, what binds its signature kept: a statement
    sweep cannot do it, a function with no statement at all is no Python."""
    lines = source.splitlines()
    found = []
    for name, start, end in function_spans(lines):
        head = next((i for i in range(start, end) if _DEF.match(lines[i])), None)
        if head is None or not any(lines[i].strip().startswith("@T.prim_func")
                                   for i in range(start, head)):
            continue
        body = [i for i in range(head + 1, end) if lines[i].strip()]
        if not body:
            continue
        indent = " " * indent_of(lines[body[0]])
        kept = [lines[i] for i in body if indent_of(lines[i]) == len(indent)
                and _PRIM_KEEP.match(lines[i])]
        if [line.strip() for line in lines[head + 1:end] if line.strip()] == \
                [line.strip() for line in kept] + [_EMPTY_BODY]:
            continue
        emptied = lines[:head + 1] + kept + [indent + _EMPTY_BODY] + lines[end:]
        found.append(Candidate(f"empty body of {name}", _join(emptied)))
    return found


def drop_statements(source: str, depth: int) -> list[Candidate]:
    """Statements at indentation `depth` (with what they nest), in runs and one by one."""
    lines = source.splitlines()
    found = []
    for group in statement_groups(lines, depth):
        for chunk in _chunks(group):
            first, last = chunk[0][0] + 1, chunk[-1][1]
            what = f"drop line {first}" if last == first else f"drop lines {first}-{last}"
            found.append(Candidate(what, _without(lines, chunk)))
    return found


def max_depth(source: str) -> int:
    """The deepest indentation of a statement inside a function."""
    depths = [indent_of(line) for line in source.splitlines() if line.strip()]
    return max(depths, default=0)


def zero_bindings(source: str) -> list[Candidate]:
    """Each tensor binding's value replaced by zeros of its type (its uses stay well typed)."""
    lines = source.splitlines()
    found = []
    for i, line in enumerate(lines):
        annotated, out_type = _ANNOTATED.match(line), _OUT_TYPE.match(line)
        if annotated:
            indent, name, dims, dtype, value = annotated.groups()
        elif out_type:
            indent, name, value, dims, dtype = out_type.groups()
        else:
            continue
        if value.startswith("R.zeros("):
            continue
        shape = dims.rstrip(", ").strip()
        zeros = f'R.zeros(R.shape([{shape}]), dtype="{dtype}")'
        edited = f'{indent}{name}: R.Tensor(({dims}), dtype="{dtype}") = {zeros}'
        found.append(Candidate(f"zeros for {name} (line {i + 1})",
                               _join(lines[:i] + [edited] + lines[i + 1:])))
    return found


def _shape_values(source: str) -> list[int]:
    values = {int(v) for v in _INT64.findall(source)}
    for context in _SHAPE_CONTEXTS:
        for match in context.finditer(source):
            values.update(int(v) for v in re.findall(r"\b\d+\b", match.group(2)))
    return sorted((v for v in values if v > 1), reverse=True)


def _replace_value(source: str, old: int, new: int) -> str:
    text = re.sub(rf"T\.int64\({old}\)", f"T.int64({new})", source)
    for context in _SHAPE_CONTEXTS:
        text = context.sub(lambda m: m.group(1) + re.sub(rf"\b{old}\b", str(new), m.group(2))
                           + m.group(3), text)
    return text


def shrink_shapes(source: str) -> list[Candidate]:
    """Each extent used in shapes (largest first) made 1, then halved, everywhere at once."""
    found = []
    for value in _shape_values(source):
        for new in dict.fromkeys((1, value // 2)):
            if new < value:
                found.append(Candidate(f"shape extent {value} -> {new}",
                                       _replace_value(source, value, new)))
    return found


_SHAPE_VAR = re.compile(r"^[ \t]*(\w+) = T\.int64\(\)[ \t]*$", re.MULTILINE)


def concretize_shape_vars(source: str) -> list[Candidate]:
    """Each symbolic shape variable (`n = T.int64()`, `"n"` in a signature) made the constant
    1 everywhere, its declarations dropped: a symbolic shape the bug does not need goes."""
    found = []
    for name in dict.fromkeys(m.group(1) for m in _SHAPE_VAR.finditer(source)):
        text = re.sub(rf"^[ \t]*{name} = T\.int64\(\)[ \t]*\n", "", source, flags=re.MULTILINE)
        text = text.replace(f'"{name}"', "1")
        text = re.sub(rf"(?<![\w.\"']){name}(?![\w\"'])", "1", text)
        found.append(Candidate(f"shape variable {name} -> 1", text))
    return found
