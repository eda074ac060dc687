"""The case a user submits (docs/contract.md), validated at the edge with messages that name the field."""

from __future__ import annotations

import ast
import io
import json
import re
import threading
import tokenize
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from tvmrepro.attachments import Attachment, check_files, too_many
from tvmrepro.errors import BadInput, did_you_mean
from tvmrepro.settings import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    MAX_FILES,
    MAX_FILES_BYTES,
    MAX_MEMORY_MB,
    MAX_TIMEOUT_S,
)

SCRIPT_VARIANT = "script"
# The source of a case whose module comes as tvm.ir.save_json text (`module_json`): the harness
# defines MODULE_JSON before it runs.
JSON_MODULE_SOURCE = "import tvm\n\nModule = tvm.ir.load_json(MODULE_JSON)\n"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VARIANT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


# What Python's parser cannot take at all: nesting deeper than its stack (RecursionError, or
# MemoryError from the parser's own stack), null bytes (ValueError on Python 3.11).
_UNPARSABLE = (RecursionError, MemoryError, ValueError, OverflowError)
# CPython 3.11's AST constructor keeps its recursion depth per interpreter, not per thread: a
# thread switch inside it (a garbage collection running a finalizer) lets another thread's parse
# move that depth, and one of them ends in "SystemError: AST constructor recursion depth
# mismatch" (seen with 20 submissions at once). One parse at a time, in every thread.
_PARSING = threading.Lock()


@overload
def parse_python(source: str, filename: str = ..., mode: Literal["exec"] = ...) -> ast.Module: ...
@overload
def parse_python(source: str, filename: str, mode: str) -> ast.AST: ...
def parse_python(source: str, filename: str = "<case>", mode: str = "exec") -> ast.AST:
    """ast.parse, safe beside other threads' parses (every parse of the project's goes here)."""
    with _PARSING:
        return ast.parse(source, filename, mode)


@lru_cache(maxsize=32)
def _syntax_error(source: str, mode: str = "exec") -> str | None:
    """Why `source` is not usable Python (invalid, nested deeper than the parser allows, or
    no statement at all), or None (cached: a case submitted again, as a cache hit is, is not
    compiled again; compiling a large TVMScript module takes milliseconds)."""
    try:
        tree = parse_python(source, "<case>", mode)
        if not isinstance(tree, ast.Module | ast.Expression):
            raise AssertionError(f"ast.parse in mode {mode!r} gave a {type(tree).__name__}")
        if isinstance(tree, ast.Module) and not tree.body:
            return "empty: it holds no Python statement (only blanks or comments)"
        compile(tree, "<case>", mode, dont_inherit=True)
    except SyntaxError as exc:
        where = f" at line {exc.lineno}, column {exc.offset}" if exc.lineno else ""
        return f"not valid Python: {exc.msg}{where}"
    except _UNPARSABLE as exc:
        if isinstance(exc, RecursionError | MemoryError):
            return "not valid Python: nested more deeply than Python's parser allows"
        return f"not valid Python: {exc}"
    return None


class PassSpec(BaseModel):
    """One pass: a name in tvm.relax.transform / tvm.tirx.transform, with keyword arguments."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "30" is not a number here
    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a pass name")
        return value


class Variant(BaseModel):
    """A named pass sequence to apply to the module."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "30" is not a number here
    name: str
    passes: list[PassSpec]

    @field_validator("name")
    @classmethod
    def _short(cls, value: str) -> str:
        if not _VARIANT_NAME.match(value):
            raise ValueError("variant names are 1-64 letters, digits, '.', '_' or '-'")
        return value

    @field_validator("passes", mode="before")
    @classmethod
    def _names_to_specs(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": p} if isinstance(p, str) else p for p in value]
        return value


class Inputs(BaseModel):
    """How entry inputs are generated: seeded random data shaped by the signature."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "30" is not a number here
    seed: int = 0
    # Values for symbolic shape variables (e.g. {"n": 16}); unnamed ones default to 4.
    shape_vars: dict[str, int] = Field(default_factory=dict)
    # The entry's inputs as .npy files of the case (`files`), one a parameter in order, in
    # place of generated ones (a frontend script's inputs, carried by its extracted case).
    files: list[str] = Field(default_factory=list)


class Case(BaseModel):
    """A bug report: TVMScript plus pass sequences (module mode), or a whole script."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "30" is not a number here
    title: str = ""
    source: str | None = None
    module: str = "Module"
    variants: list[Variant] | None = None
    script: str | None = None
    target: str | None = None
    opt_level: int = Field(default=3, ge=0, le=4)
    entry: str | None = None
    # A NumPy expression of the entry's inputs (by parameter name, `np` is numpy) that the
    # outputs must match, e.g. "np.maximum(x @ w, 0)": a miscompile then shows on its own.
    reference: str | None = None
    inputs: Inputs = Field(default_factory=Inputs)
    timeout_s: int = Field(default=DEFAULT_TIMEOUT_S, ge=1, le=MAX_TIMEOUT_S)
    memory_mb: int = Field(default=DEFAULT_MEMORY_MB, ge=256, le=MAX_MEMORY_MB)
    # The module as tvm.ir.save_json wrote it, where its TVMScript does not parse back; the
    # source then reads it (MODULE_JSON), by default JSON_MODULE_SOURCE.
    module_json: str | None = None
    # The build, as relax.build takes it: the VM's exec mode, each pipeline by name (None: no
    # pipeline), and the PassContext's config around the passes and the build.
    exec_mode: Literal["bytecode", "compiled"] = "bytecode"
    relax_pipeline: str | None = "default"
    tir_pipeline: str | None = "default"
    pass_config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # Exact package versions the report needs (e.g. {"torch": "2.13.0"}): a submission is
    # refused unless every environment it runs on pins them (its frontend packages included).
    requires: dict[str, str] = Field(default_factory=dict)
    # Which layer is wrong (docs/layers.md): a script that fails, or whose outputs differ from
    # its reference, is run again along cut pipelines and its result's `layer` says where the
    # failure first shows (import, a pass, codegen, runtime). Scripts only.
    layer: bool = False
    # Files beside the code (a model, pickled inputs), each written read-only into the run's
    # work directory under its name: base64 content on submit, {name, sha256, size} once
    # stored (tvmrepro.attachments).
    files: list[Attachment] = Field(default_factory=list, description=(
        f"files beside the code, read from its directory: at most {MAX_FILES}, "
        f"{MAX_FILES_BYTES >> 20} MiB in all"))

    @field_validator("files", mode="before")
    @classmethod
    def _few_files(cls, value: Any) -> Any:
        return too_many(value)  # refused before each file is decoded

    @field_validator("files")
    @classmethod
    def _files(cls, value: list[Attachment]) -> list[Attachment]:
        return check_files(value)

    @field_validator("source", "script")
    @classmethod
    def _python(cls, value: str | None) -> str | None:
        # A typo is a 400 at submit, not one failed run per variant and environment.
        if value is not None and (problem := _syntax_error(value)):
            raise ValueError(problem)
        return value

    @field_validator("reference")
    @classmethod
    def _expression(cls, value: str | None) -> str | None:
        if value is not None and (problem := _syntax_error(value, "eval")):
            raise ValueError(f"not a Python expression: {problem.removeprefix('not valid Python: ')}")
        return value

    @model_validator(mode="after")
    def _one_mode(self) -> Case:
        if self.layer and self.script is None:
            raise ValueError("'layer' places a script's failure; a module case names its "
                             "passes in its variants already")
        if self.script is not None:
            if self.source is not None or self.variants is not None:
                raise ValueError("give either 'script' or 'source' with 'variants', not both")
            return self
        if self.source is None and self.module_json is not None:
            self.source = JSON_MODULE_SOURCE
        if self.source is None:
            raise ValueError("missing 'source' (TVMScript defining an IRModule) or 'script'")
        if not self.variants:
            raise ValueError("missing 'variants' (at least one named pass sequence)")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique, got {names}")
        if not _NAME.match(self.module):
            raise ValueError(f"module {self.module!r} is not a Python name")
        if self.reference is not None and not self.entry:
            raise ValueError("a 'reference' needs an 'entry' whose outputs it checks")
        missing = [n for n in self.inputs.files if n not in {f.name for f in self.files}]
        if missing:
            raise ValueError(f"inputs.files names {missing[0]!r}, which is none of the case's "
                             "files")
        return self

    @property
    def variant_names(self) -> list[str]:
        """The names of the runs one environment makes of this case."""
        return [SCRIPT_VARIANT] if self.variants is None else [v.name for v in self.variants]

    def variant(self, name: str) -> Variant | None:
        """The variant called `name` (None in script mode); BadInput if there is none."""
        if self.variants is None:
            if name != SCRIPT_VARIANT:
                raise BadInput("variant", f"a script case has only the variant {SCRIPT_VARIANT!r}")
            return None
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise BadInput("variant", f"no variant {name!r}; the case has {self.variant_names}")


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def bad_input(exc: ValidationError, default_field: str) -> BadInput:
    """The first validation error as BadInput naming its field, e.g. 'variants[1].passes[0]'."""
    return error_input(exc.errors()[0], default_field)


def error_input(err: ErrorDetails, default_field: str) -> BadInput:
    """One validation error as BadInput naming its field (`default_field`: it names none)."""
    # pydantic puts validator and union-member names ("list[str]", "function-after[...]")
    # into the location; field names never hold a "[".
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
    return BadInput(_field_path(loc) or default_field, err["msg"].removeprefix("Value error, "))


def parse_case(data: Any) -> Case:
    """Validate a decoded JSON value as a Case; BadInput names the first wrong field."""
    if not isinstance(data, dict):
        raise BadInput("case", f"must be a JSON object, got {type(data).__name__}")
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        raise bad_input(exc, "case") from exc


# File stems that name no report in particular (many reports are saved as one of them, one
# after another): such a script's title is its first comment or docstring line.
GENERIC_STEMS = frozenset({"a", "bug", "case", "demo", "example", "issue", "main", "original",
                           "repro", "reproduce", "reproducer", "report", "run", "sample",
                           "script", "t", "temp", "test", "tmp", "untitled", "x"})
_DIRECTIVES = ("#!", "# -*-", "# coding", "# vim:", "# type:", "# noqa", "# pylint", "# fmt:")


def _first_comment(text: str) -> str | None:
    """The first comment before the script's first statement that is not a tool's directive."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                if not token.string.lower().startswith(_DIRECTIVES) and token.string.strip("# "):
                    return token.string.lstrip("#").strip()
            elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING):
                return None
    except (tokenize.TokenError, SyntaxError):
        pass
    return None


def script_title(path: Path, text: str) -> str:
    """A script's title: its file name; for a generic name (repro.py, script_2.py) the script's
    first comment or docstring line, else the name with its folder (export-mm-default/report.py)."""
    generic = re.fullmatch(r"(?P<stem>[a-z]+)[_\- ]?\d{0,2}", path.stem.lower())  # not an issue number
    if generic is None or generic["stem"] not in GENERIC_STEMS:
        return path.name
    try:
        docstring = ast.get_docstring(ast.parse(text))
    except (SyntaxError, ValueError):
        docstring = None
    described = _first_comment(text) or docstring or ""
    line = next((line.strip() for line in described.splitlines() if line.strip()), "")
    return line[:120] or (f"{path.parent.name}/{path.name}" if path.parent.name else path.name)


def load_case_file(path: Path) -> Case:
    """Read a case: a .json file is a case, a .py file is a script-mode case."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise BadInput(str(path), f"cannot read: {exc.strerror}") from exc
    if path.suffix == ".py":
        return parse_case({"title": script_title(path, text), "script": text})
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(str(path), f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    return parse_case(data)


def check_pass_names(case: Case, known: set[str]) -> None:
    """BadInput naming the first pass that no environment in question has (skipped if none known)."""
    if not known or case.variants is None:
        return
    for v_index, variant in enumerate(case.variants):
        for p_index, spec in enumerate(variant.passes):
            if spec.name not in known:
                raise BadInput(f"variants[{v_index}].passes[{p_index}]",
                               f"unknown pass {spec.name!r} (not in tvm.relax.transform or "
                               f"tvm.tirx.transform of any selected environment)"
                               f"{did_you_mean(spec.name, known)}")
