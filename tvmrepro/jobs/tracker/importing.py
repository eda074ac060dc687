"""Reports from a GitHub issue export (`gh issue list --json number,title,state,body,url`) or
one issue's Markdown: each report's script (its Python blocks, joined), stated TVM version and
quoted error, or why it has no runnable code."""

from __future__ import annotations

import ast
import json
import re
import sys
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tvmrepro.attachments import WITH_CONTENTS, Attachment, read_files
from tvmrepro.cases import Case, parse_case, parse_python
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.bounded import bounded, time_bounded
from tvmrepro.jobs.tracker.identity import issue_identity, repo_of
from tvmrepro.jobs.tracker.markdown import (
    Block,
    fenced_blocks,
    outside_blocks,
    quoted_error,
    stated_version,
    titled_error,
)
from tvmrepro.jobs.tracker.modules import module_case

EXPORT_FIELDS = ("number", "title", "state", "body", "url")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".txt", "")
# What reading one report may take (tvmrepro.jobs.bounded): a body made to make the patterns
# below backtrack is refused (TooSlow, a BadInput), never read for minutes.
IMPORT_BUDGET_S = 3.0
_PYTHON_TAGS = {"", "python", "py", "python3", "ipython", "pycon"}
# Sections whose blocks show what happened, not what to run ("Actual behavior", "Error log";
# not "Steps to reproduce the error").
_OUTPUT_SECTION = bounded(r"^\W*(actual|expected|output|error|log|result|trace|crash)",
                          re.IGNORECASE)
_TRACEBACK = bounded(r"^\s*(Traceback \(most recent call last\)|File \".*\", line \d+)",
                     re.MULTILINE)
# Files a script reads that a body cannot hold (models, inputs, weights).
_DATA_FILE = bounded(r"\.(onnx|pkl|pickle|pt|pth|tflite|pb|npy|npz|params|h5|bin|so|tar)$")


class ImportedReport(BaseModel):
    """One report as imported: where it came from, what it quotes, and its case or why none."""

    number: int | None
    title: str
    state: str | None
    url: str | None
    # "apache/tvm", from the issue's address or its `owner/repo#N`.
    repo: str | None = None
    # Where each of number, title, state, url and repo came from: "export", "gh issue view",
    # "heading", "text" or "file name" (one issue's Markdown reads them in that order).
    identity_from: dict[str, str] = Field(default_factory=dict)
    tvm_version: str | None
    quoted_error: str | None
    quoted_error_type: str | None
    # The stage its quoted traceback shows the error was raised in ("build"), where it shows.
    quoted_stage: str | None = None
    script: str | None
    no_code: str | None  # why there is no runnable script (None when there is one)
    # The case JSON in module mode, where the script is a module, its passes and a build.
    module_case: dict[str, Any] | None = None
    # The files the script names (string constants such as "model.onnx") that `import
    # --attachments DIR` found there, attached to its case (their contents travel with the
    # report only in a dump with tvmrepro.attachments.WITH_CONTENTS), and those it names that
    # were not given: a report missing any has no runnable script until they are given.
    files: list[Attachment] = Field(default_factory=list)
    missing_files: list[str] = Field(default_factory=list)

    def case(self) -> Case:
        """The report's script case, as `tvmrepro run repro.py --file ...` makes it."""
        if self.script is None:
            raise BadInput(self.label, f"no case: {self.no_code}")
        files = [entry.model_dump(mode="json", context=WITH_CONTENTS) for entry in self.files]
        return parse_case({"title": self.label, "script": self.script} |
                          ({"files": files} if files else {}))

    @property
    def label(self) -> str:
        """How the report is named: "#17357", or its title when it has no number."""
        return f"#{self.number}" if self.number is not None else self.title


def is_code(block: Block) -> bool:
    """A block the reporter meant to run: Python that parses, not a traceback or output."""
    if block.language not in _PYTHON_TAGS or _TRACEBACK.search(block.text):
        return False
    # Under "Actual/Expected behavior" even a block tagged python is output (a printed module):
    # run after the script, it could fail where the script did not.
    if _OUTPUT_SECTION.search(block.section):
        return False
    try:
        tree = parse_python(textwrap.dedent(block.text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return bool(tree.body)


def joined_script(blocks: list[Block]) -> str:
    """The code blocks as one script, in the body's order; a block repeated is taken once (a
    report that shows its script twice, or a module again in its "before" section)."""
    seen: set[str] = set()
    parts: list[str] = []
    for block in blocks:
        text = textwrap.dedent(block.text).strip("\n")
        if text not in seen:
            seen.add(text)
            parts.append(text)
    return "\n\n".join(parts) + "\n"


@lru_cache(maxsize=1)
def environment_modules() -> frozenset[str]:
    """The modules some pinned environment can import besides the standard library: its
    packages (images/environments.toml) by their import names (apache-tvm is `tvm`,
    ml-dtypes `ml_dtypes`), and the frontend packages its release was verified with (torch,
    onnx, onnxruntime, onnxscript: a report that imports one runs in the frontend flavour)."""
    catalog = default_catalog().environments
    packages = {name for env in catalog for name in env.packages}
    frontends = {name for env in catalog for name in env.frontend_modules}
    return frozenset({name.removeprefix("apache-").replace("-", "_") for name in packages}
                     | frontends)


def missing_inputs(script: str) -> list[str]:
    """What the script needs that no environment has: packages beyond TVM's own, data files."""
    tree = parse_python(script)
    needs: list[str] = []
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                 else [])
        for name in names:
            top = name.split(".")[0]
            if top not in environment_modules() and top not in sys.stdlib_module_names:
                needs.append(f"package {top}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and _DATA_FILE.search(node.value):
            needs.append(f"file {node.value}")
    return list(dict.fromkeys(needs))


def named_files(script: str) -> list[str]:
    """The data files the script names (string constants: "model.onnx", "./inputs.pkl")."""
    try:
        needs = missing_inputs(script)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # no script to read
        return []
    return [need.removeprefix("file ") for need in needs if need.startswith("file ")]


def given_files(script: str | None, folder: Path | None,
                number: int | None) -> tuple[list[Attachment], list[str]]:
    """The files the script names that `folder` holds (in its subfolder named by the issue's
    number first, then in itself), and the names it lacks. A name with a directory part
    ("/data/model.onnx") is never given: the case reads its files from its own directory."""
    found: list[Attachment] = []
    missing: list[str] = []
    for named in named_files(script) if script is not None else []:
        name = named.removeprefix("./")
        places = ([folder / str(number), folder] if number is not None else [folder]) \
            if folder is not None and Path(name).name == name else []
        path = next((place / name for place in places if (place / name).is_file()), None)
        if path is None:
            missing.append(named)
        elif name not in {entry.name for entry in found}:
            found += read_files([path], "--attachments")
    return found, missing


def why_no_code(blocks: list[Block], script: str | None,
                given: frozenset[str] = frozenset()) -> str | None:
    """Why the body has no runnable script, or None when it has one (`given`: the files it
    names that come with it)."""
    if not blocks:
        return "the body has no code block"
    if script is None:
        kinds = sorted({b.language or "untagged" for b in blocks})
        cut = " (the body ends inside a block: the stored text is cut short)" \
            if not blocks[-1].closed else ""
        return f"no block is a Python script (blocks: {', '.join(kinds)}; tracebacks and " \
               f"output are not code){cut}"
    if "tvm" not in script:
        return "the code does not use TVM"
    needs = [need for need in missing_inputs(script)
             if need.removeprefix("file ") not in given]
    if needs:
        return f"the script needs what the body does not hold: {', '.join(needs)}"
    return None


@time_bounded(IMPORT_BUDGET_S)
def import_body(body: str, number: int | None = None, title: str = "", state: str | None = None,
                url: str | None = None, attachments: Path | None = None, *,
                repo: str | None = None,
                identity_from: dict[str, str] | None = None) -> ImportedReport:
    """One report from its Markdown body (`attachments`: a folder of the files its script
    reads, as downloaded from the issue)."""
    blocks = fenced_blocks(body)
    code = [b for b in blocks if is_code(b)]
    script = joined_script(code) if code else None
    files, missing = given_files(script, attachments, number)
    reason = why_no_code(blocks, script, frozenset(named_files(script or "")) - set(missing))
    # A title often names the error when the body does not ("[Bug] TVMError: ...").
    quoted = quoted_error([b for b in blocks if b not in code], outside_blocks(body)) \
        or titled_error(title)
    label = f"#{number}" if number is not None else title
    return ImportedReport(number=number, title=title, state=state, url=url,
                          repo=repo or repo_of(url), identity_from=identity_from or {},
                          tvm_version=stated_version(body),
                          quoted_error=quoted.line if quoted else None,
                          quoted_error_type=quoted.error_type if quoted else None,
                          quoted_stage=quoted.stage if quoted else None,
                          script=None if reason else script, no_code=reason,
                          module_case=None if reason or script is None
                          else valid_module_case(script, label),
                          files=files, missing_files=missing)


def valid_module_case(script: str, title: str) -> dict[str, Any] | None:
    """The script's module-mode case where it is one and validates as a case, else None."""
    case = module_case(script, title)
    if case is None:
        return None
    try:
        parse_case(case)
    except BadInput:
        return None
    return case


def export_entry(item: Any, index: int, prefix: str = "",
                 attachments: Path | None = None) -> ImportedReport:
    """One issue of an export (`[index]` in messages, after `prefix`), imported (its files
    from `attachments`, as import_body takes them)."""
    where = f"{prefix}[{index}]"
    if not isinstance(item, dict):
        raise BadInput(where, f"must be an object with {', '.join(EXPORT_FIELDS)}, "
                              f"got {type(item).__name__}")
    if not isinstance(item.get("body"), str):
        raise BadInput(f"{where}.body", "missing, or not a string (export with "
                                        "`gh issue list --json number,title,state,body,url`)")
    number = item.get("number")
    if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
        raise BadInput(f"{where}.number", f"must be an integer, got {number!r}")
    for field in ("title", "state", "url"):
        if item.get(field) is not None and not isinstance(item[field], str):
            raise BadInput(f"{where}.{field}", "must be a string")
    state = item.get("state")
    if state is not None and state.upper() not in ("OPEN", "CLOSED"):
        raise BadInput(f"{where}.state", f"must be OPEN or CLOSED, got {state[:40]!r}")
    given = {name: "export" for name in ("number", "title", "state", "url")
             if item.get(name) not in (None, "")}
    return import_body(item["body"], number, item.get("title") or "",
                       state.upper() if state else None, item.get("url"), attachments,
                       identity_from=given | ({"repo": "export"} if repo_of(item.get("url"))
                                              else {}))


@time_bounded(IMPORT_BUDGET_S)
def import_markdown(text: str, file_name: str | None = None, attachments: Path | None = None,
                    where: str = "") -> ImportedReport:
    """One issue's Markdown, or `gh issue view N` printed to a file: who it is from its `gh`
    header, its `# title` heading, its own address or `owner/repo#N` in its prose, then
    `file_name` (identity.issue_identity), and its report from the body below them."""
    found = issue_identity(text, file_name, where)
    return import_body(found.body, found.number, found.title or "", found.state, found.url,
                       attachments, repo=found.repo, identity_from=found.sources)


def import_export(data: Any, attachments: Path | None = None) -> list[ImportedReport]:
    """Every report of a decoded `gh issue list --json ...` export."""
    if not isinstance(data, list):
        raise BadInput("issues", f"must be a JSON array of issues, got {type(data).__name__}")
    reports = [export_entry(item, i, attachments=attachments) for i, item in enumerate(data)]
    numbers = [r.number for r in reports if r.number is not None]
    if len(set(numbers)) != len(numbers):
        twice = sorted({n for n in numbers if numbers.count(n) > 1})
        raise BadInput("issues", f"issue numbers appear twice: {twice}")
    return reports


def import_file(path: Path, attachments: Path | None = None) -> list[ImportedReport]:
    """The reports of an export (.json) or of one issue's Markdown (.md, .txt or no suffix:
    also `gh issue view N` printed to a file; import_markdown); the files their scripts name
    from the folder `attachments` (in a subfolder named by the issue's number, or in the
    folder itself)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(str(path), f"cannot read: {getattr(exc, 'strerror', None) or exc}") from exc
    if path.suffix == ".json":
        try:
            return import_export(json.loads(text), attachments)
        except json.JSONDecodeError as exc:
            raise BadInput(str(path), f"not JSON: {exc.msg} at line {exc.lineno} "
                                      f"column {exc.colno}") from exc
    if path.suffix in MARKDOWN_SUFFIXES:
        return [import_markdown(text, path.stem, attachments, f"{path}: ")]
    raise BadInput(str(path), "expected an issue export (.json) or one issue's Markdown (.md, "
                              "or `gh issue view N` output: .md, .txt)")
