"""From a release transition to the PR: the window's commits ranked by the evidence of a case.

Pure logic: no store, no service, no I/O. The evidence of one transition (`Evidence`) comes
from the run that failed on its failing side (the later release for a regression, the earlier
one for a fix) and from the case itself:
- the failing C++ frame (`signature_frame`) and its source file, read from the backtrace
  (`File "/project/src/...", line N, in <function>`), and the TVM frames around it: a crash's
  `native_frames`, and TVM's Python frames (`python/tvm/relax/frontend/onnx/...`);
- the failing pass (the innermost of the run's `pass_path`) and its source file;
- the failing check's own names (`flat_map_` of `Check failed: (it != flat_map_.end())`);
- where both sides fail (the error is worded anew), the words of the error's own text;
- the case's terms: the names its code calls through a module or an object (`R.prod`,
  `T.decl_buffer`, `func.specialize`), comments, strings and other libraries' calls aside,
  the operators a model names (`make_node("TopK", ...)`), and its passes.

A wrong result has no frame: its evidence is the ops and passes the case exercises.

Each piece of evidence is an `Item` with a weight. A commit of the window matches an item
when its changes show it (the file changed, the function's hunk, the name among the changed
identifiers, a test added that names it, the subject's words). The score of a commit is

    score = sum(weight x specificity x focus of each matched item) / sum(weight of all items)

- specificity: 1 / (1 + log2(n)), n the window's commits that match the item: a name that
  twenty refactors touched tells little;
- focus: 1 for a commit of up to FOCUS_FILES source files, 1 / (1 + k log2(files /
  FOCUS_FILES)) beyond: a large refactor is weighed down by how much else it changed; k is
  FOCUS_FIX (0.5) for a behaviour's fix, FOCUS_OTHER (0.25) for a regression or a rewording;
  the error's own words on a changed line are not weighed down (`Item.precise`).

So a score is the share of the case's evidence that the commit accounts for, discounted for
evidence it shares with other commits and for its size: 1.0 would be a small commit that alone
shows every piece. Commits the earlier release already has as cherry-picks, and commits that
change only tests, docs or CI (`inert`), are left out.
"""

from __future__ import annotations

import ast
import io
import itertools
import keyword
import math
import posixpath
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tvmrepro.cases import parse_python
from tvmrepro.history import Commit
from tvmrepro.jobs.bounded import bounded  # the run's text: each match time-bounded

MAX_SUSPECTS = 10
_PLUMBING = ("TVMFFI", "tvm_ffi", "ffi::")  # the FFI's own frames: how the error travelled
# The IR visitors' base classes: every pass runs through them, so they point at none.
_MACHINERY = bounded(r"^(?:Stmt|Expr|StmtExpr|Type|Pattern)(?:Visitor|Mutator|Functor)\b")
FOCUS_FILES = 8
_INERT = ("tests/", "docs/", ".github/", "ci/")
# How hard a large commit is weighed down (`focus`). A release's fix of a behaviour is
# mostly a commit made for it, small; a regression, or an error worded anew while it stays
# an error, comes as often with a refactor that changed the behaviour in passing.
FOCUS_FIX, FOCUS_OTHER = 0.5, 0.25
_TVM_FILE = bounded(r'File "/project/(?P<path>[^"]+)", line \d+, in (?P<function>.+)$')
# TVM's own Python, as the sandbox's site-packages hold it: `python/tvm/...` in apache/tvm.
_TVM_PYTHON = bounded(r'File "[^"]*/site-packages/(?P<path>tvm/[^"]+\.py)", line \d+, '
                         r'in (?P<function>\w+)')
_UNKNOWN_FRAME = bounded(r'File "<unknown>", line \d+, in (?P<function>.+)$')
_CHECK = bounded(r"Check failed: \(?(?P<condition>.+?)\)? (?:is false|\([^()]*? vs\. [^()]*?\))")
_NAME = bounded(r"[A-Za-z_][A-Za-z0-9_]{2,}")
# A model's operator named in a string (`"TopK"`, `"GatherElements"`): a capital, then a small
# letter somewhere (dtypes, axis kinds such as "SS" and names such as "b" are not operators).
_OPERATOR = bounded(r"^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
# Names any case uses (the script's own scaffolding), never evidence.
_COMMON = frozenset({
    "tvm", "relax", "script", "tirx", "tir", "ir_module", "function", "prim_func", "Tensor",
    "dtype", "float32", "int32", "int64", "handle", "numpy", "testing", "runtime", "cpu",
    "build", "compile", "transform", "Module", "main", "params", "with_attr", "target",
    "llvm", "print", "tolist", "zeros", "ones", "array", "shape", "astype", "VirtualMachine",
    "IRModule", "Target", "match_buffer", "device", "PassContext", "Sequential", "data",
    "grid", "axis", "remap", "spatial", "sblock", "block", "reads", "writes", "dataflow",
    "output", "call_tir", "Buffer", "buffer", "tensor", "assert_array_equal"})
_NOT_TVM = frozenset({"np", "numpy", "self", "cls", "os", "sys", "math", "random", "torch"})
_SUBJECT_SKIP = frozenset({"fix", "fixes", "the", "and", "for", "with", "from", "into", "when",
                           "add", "use", "support", "relax", "tirx", "tir", "bugfix", "refactor",
                           "phase", "out", "make", "update", "remove", "test", "tests"})
_FIX_WORDS = frozenset({"fix", "fixes", "fixed", "bugfix", "correct", "handle", "repair"})


@dataclass(frozen=True)
class Evidence:
    """What a transition's failing side and its case say about where the change lies."""

    direction: str  # "regression" (good -> bad) or "fix" (bad -> good)
    frame: str | None = None  # BufferFlattener::Lookup
    frame_file: str | None = None  # src/tirx/transform/flatten_buffer.cc
    stack: tuple[tuple[str | None, str], ...] = ()  # the other TVM frames, innermost first
    failing_pass: str | None = None  # FlattenBuffer
    check_names: tuple[str, ...] = ()  # names in the failed check's condition
    terms: tuple[str, ...] = ()  # the case's ops and calls
    passes: tuple[str, ...] = ()  # the passes the case names
    # The words TVM's own text of the error has (the message without its check and without
    # what it quotes of the case): "Literal value 2147483648 exceeds maximum of int32" ->
    # Literal, value, exceeds, maximum.
    message_words: tuple[str, ...] = ()
    reworded: bool = False  # both sides fail: the change is in the error's wording


@dataclass
class Item:
    """One piece of evidence, its weight, and how a commit shows it."""

    label: str  # in words, for the reasons
    weight: float
    test: Callable[[Commit], str | None]  # the reason when the commit shows it, else None
    matches: int = 0  # commits of the window that show it
    # Not weighed down by the commit's size (`focus`): evidence that only the change itself
    # shows (the error's own words on a changed line), however much else the commit changed.
    precise: bool = False


@dataclass
class Suspect:
    """A ranked commit and why."""

    commit: Commit
    score: float
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The suspect as the bisect object carries it."""
        return {"sha": self.commit.sha, "pr": self.commit.pr, "subject": self.commit.subject,
                "url": self.commit.url, "date": self.commit.date,
                "score": round(self.score, 3), "reasons": self.reasons}


# Evidence from a run and a case -------------------------------------------------------------

def frames_of(log_text: str, python: bool = False) -> list[tuple[str | None, str]]:
    """The TVM C++ frames of a backtrace, innermost first: (source path or None, function);
    with `python`, TVM's Python frames too (`python/tvm/relax/block_builder.py`)."""
    frames: list[tuple[str | None, str]] = []
    for line in log_text.splitlines():
        line = line.strip()
        if (match := _TVM_FILE.search(line)) and not match["path"].startswith("python/"):
            # `src/relax/op/distributed/../op_common.h` is the file a commit names without `..`
            frames.append((posixpath.normpath(match["path"]),
                           short_function(match["function"])))
        elif (match := _UNKNOWN_FRAME.search(line)) and "::" in match["function"]:
            frames.append((None, short_function(match["function"])))
        elif python and (match := _TVM_PYTHON.search(line)):
            frames.append((f"python/{match['path']}", match["function"]))
    kept = [f for f in reversed(frames)
            if f[1] and not f[1].startswith(_PLUMBING) and not _MACHINERY.match(f[1])]
    return list(dict.fromkeys(kept))


def short_function(text: str) -> str:
    """`const X& tvm::tirx::BufferFlattener::Lookup(const Y&)` -> `BufferFlattener::Lookup`."""
    depth, out = 0, []
    for char in text:
        depth += {"(": 1, "<": 1}.get(char, 0)
        if depth == 0:
            out.append(char)
        depth -= {")": 1, ">": 1}.get(char, 0)
    words = "".join(out).split()
    parts = [p for p in (words[-1] if words else "").split("::") if p]
    while len(parts) > 1 and parts[0][:1].islower():
        parts.pop(0)  # namespaces move between releases
    return "::".join(parts)


def case_terms(source: str) -> list[str]:
    """The names the code calls through a module or an object (`R.prod` -> `prod`), comments,
    strings, numpy's names, another library's (`helper.make_node` after `from onnx import
    helper`) and the program's own (`cls.f`) aside; then the operators a model names in
    strings, as a call's first argument (`make_node("TopK", ...)` -> `TopK`)."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                  if t.type in (tokenize.NAME, tokenize.OP, tokenize.STRING)]
    except (tokenize.TokenError, SyntaxError):
        return []
    foreign = _NOT_TVM | foreign_names(source)
    terms: list[str] = []
    root = ""
    for before, token in itertools.pairwise(tokens):
        if token.type == tokenize.NAME and not (before.type == tokenize.OP
                                                and before.string == "."):
            root = token.string  # a chain starts
        elif (token.type == tokenize.NAME and len(token.string) > 2
              and root not in foreign and token.string not in _COMMON
              and not keyword.iskeyword(token.string) and token.string not in terms):
            terms.append(token.string)
    # A call's first argument only: `make_node("TopK", ...)`, not `func_attr({"Primitive": 1})`.
    quoted = (token.string.strip("'\"") for before, token in itertools.pairwise(tokens)
              if token.type == tokenize.STRING and before.string == "(")
    return terms + list(dict.fromkeys(q for q in quoted if _OPERATOR.match(q)
                                      and q not in terms and q not in _COMMON))


def foreign_names(source: str) -> set[str]:
    """The names a script binds by importing from outside TVM (`import onnx`, `from onnx
    import helper`, `import torch.nn as nn`): what is called through them is another
    library's API, not TVM's."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((a.asname or a.name).split(".")[0] for a in node.names
                         if a.name.split(".")[0] != "tvm")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] != "tvm":
            found.update(a.asname or a.name for a in node.names)
    return found


def evidence(direction: str, failing: dict[str, Any] | None, case: dict[str, Any],
             variant: str | None, reworded: bool = False) -> Evidence:
    """The evidence of one transition: its failing run (None for a wrong result) and its case;
    `reworded` when the other side fails too (what changed is how the error is worded)."""
    source = case.get("source") or case.get("script") or ""
    terms = case_terms(source)
    passes: list[str] = []
    for entry in case.get("variants") or []:
        if variant is None or entry.get("name") == variant:
            for item in entry.get("passes") or []:
                passes.append(item if isinstance(item, str) else str(item.get("name")))
    failing = failing or {}
    log = failing.get("log_text") or (failing.get("log") or {}).get("stderr") or ""
    frame = failing.get("signature_frame")
    frames = frames_of(log, python=True)
    if failing.get("native_frames"):  # a crash: the signal handler's frames, innermost first
        frames = [(None, name) for name in failing["native_frames"]] + \
            [f for f in frames if f[0] and f[0].startswith("python/")]
    frame_file = next((path for path, name in frames if path and frame
                       and name.endswith(frame)), None)
    pass_path = [p.rsplit(".", 1)[-1] for p in failing.get("pass_path") or []
                 if not p.startswith("_")]
    message = failing.get("message") or ""
    check = _CHECK.search(message)
    check_names = [n for n in _NAME.findall(check["condition"]) if n not in ("end", "get")] \
        if check else []
    return Evidence(direction, frame, frame_file,
                    tuple(f for f in frames if f[1] != frame)[:6],
                    pass_path[-1] if pass_path else None, tuple(dict.fromkeys(check_names)),
                    tuple(terms), tuple(dict.fromkeys(passes)),
                    message_words(message[check.end():] if check else message, source),
                    reworded)


def message_words(text: str, source: str) -> tuple[str, ...]:
    """The words of an error's own wording: 3+ letters, no digits (values, addresses, the
    case's `x2_ptr`), none that the case's source has (what the message quotes of it)."""
    quoted = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))
    return tuple(dict.fromkeys(w for w in _NAME.findall(text)
                               if not any(c.isdigit() for c in w) and w not in quoted))


# Matching ----------------------------------------------------------------------------------

def words(text: str) -> set[str]:
    """Lower-case word stems (4 letters) of a name or a sentence: `adaptive_avg_pool2d` ->
    {adap, avg, pool}."""
    found = set()
    for word in _WORD.findall(text.replace("_", " ")):
        word = word.lower()
        if len(word) >= 3 and not word.isdigit():
            found.add(word[:4])
    return found


def snake(name: str) -> str:
    """`FlattenBuffer` -> `flatten_buffer`, `FuseTIR` -> `fuse_tir`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _changes_file(path: str) -> Callable[[Commit], str | None]:
    return lambda c: (f"changes {path}" if any(f.path == path for f in c.files) else None)


def _changes_function(name: str) -> Callable[[Commit], str | None]:
    method = name.split("::")[-1]
    owner = name.split("::")[-2] if "::" in name else None

    def test(commit: Commit) -> str | None:
        if name in commit.functions:
            return f"changes the function {name}"
        if owner and owner in commit.identifiers and method in commit.identifiers:
            return f"changes lines naming {owner} and {method}"
        return None
    return test


def _words_on_lines(wanted: tuple[str, ...]) -> Callable[[Commit], str | None]:
    """Every word of the error's text on the commit's changed lines: it edited the line that
    words the error (or one worded alike)."""
    def test(commit: Commit) -> str | None:
        if all(w in commit.identifiers for w in wanted):
            return f"changes lines with the words of the error ({' '.join(wanted[:6])})"
        return None
    return test


def _pass_source(name: str) -> Callable[[Commit], str | None]:
    stem = snake(name)

    def test(commit: Commit) -> str | None:
        for change in commit.files:
            parts = change.path.rsplit(".", 1)[0].split("/")
            if stem in parts and not change.path.startswith("tests/"):
                return f"changes {change.path}, the source of the pass {name}"
        return None
    return test


def _flat(name: str) -> str:
    return name.lower().replace("_", "")


def _names(name: str, what: str) -> Callable[[Commit], str | None]:
    """The name among the changed identifiers or functions (`decl_buffer` is `DeclBuffer`),
    or, for a name of three words or more, an identifier with most of its words."""
    flat, wanted = _flat(name), words(name)

    def test(commit: Commit) -> str | None:
        for ident in sorted(commit.identifiers | commit.functions):
            last = ident.split("::")[-1]
            if _flat(last) == flat or (len(wanted) >= 3 and len(wanted & words(last)) * 3
                                       >= len(wanted) * 2 and "_" in last):
                return f"changes lines naming {last} ({what})"
        return None
    return test


def _function_named(name: str) -> Callable[[Commit], str | None]:
    """A hunk of the commit is in a function of that name (`specialize` is `Specialize`)."""
    flat = _flat(name)

    def test(commit: Commit) -> str | None:
        hit = sorted(f for f in commit.functions if _flat(f.split("::")[-1]) == flat)
        return f"changes the function {hit[0]}" if hit else None
    return test


def _test_names(name: str) -> Callable[[Commit], str | None]:
    wanted, flat = words(name), _flat(name)

    def test(commit: Commit) -> str | None:
        if not any(f.path.startswith("tests/") and (f.added or 0) > 0 for f in commit.files):
            return None
        # A test's name on the changed lines, or a test whose body changed (its hunk's function):
        # it spells the name (`test_topk` spells TopK), or has most of a longer name's words.
        for ident in sorted(commit.identifiers | commit.functions):
            if ident.startswith("test_") and (spells(ident, flat) or len(wanted) > 1 and
                                              len(wanted & words(ident)) * 2 > len(wanted)):
                return f"adds or changes the test {ident}, which names {name}"
        return None
    return test


def spells(ident: str, flat: str) -> bool:
    """Some run of the identifier's `_` parts, joined, is the name: `test_top_k_sorted` and
    `test_topk` both spell `topk`."""
    parts = ident.lower().split("_")
    return any("".join(parts[i:j]) == flat for i in range(len(parts))
               for j in range(i + 1, len(parts) + 1))


def _subject_words(wanted: set[str]) -> Callable[[Commit], str | None]:
    def test(commit: Commit) -> str | None:
        subject = re.sub(r"\[[^\]]*\]|\(#\d+\)", " ", commit.subject)
        shared = sorted(words(subject) & wanted - {w[:4] for w in _SUBJECT_SKIP})
        return f"its subject says {', '.join(shared)}" if shared else None
    return test


def _fix_subject(commit: Commit) -> str | None:
    subject = commit.subject.lower()
    hit = sorted(w for w in _FIX_WORDS if re.search(rf"\b{w}\b", subject))
    return f"its subject says it is a fix ({hit[0]})" if hit else None


def items(ev: Evidence) -> list[Item]:
    """The evidence as weighted items (README, "Suspects", gives the weights' reasons)."""
    found: list[Item] = []
    if ev.frame_file:
        found.append(Item(f"the file of the failing frame {ev.frame}", 3.0,
                          _changes_file(ev.frame_file)))
    if ev.frame:
        found.append(Item(f"the failing frame {ev.frame}", 2.0, _changes_function(ev.frame)))
    native = [(path, name) for path, name in ev.stack if not (path or "").startswith("python/")]
    for path, name in native[:3]:
        found.append(Item(f"the frame {name}", 0.5,
                          _changes_file(path) if path else _changes_function(name)))
    python = dict.fromkeys(p for p, _ in ev.stack if p is not None and p.startswith("python/"))
    for file in list(python)[:3]:
        found.append(Item(f"the Python frame's file {file}", 0.5, _changes_file(file)))
    if ev.failing_pass and snake(ev.failing_pass) not in (ev.frame_file or ""):
        # (a pass whose source is the frame's file adds nothing to the frame)
        found.append(Item(f"the failing pass {ev.failing_pass}", 2.0,
                          _pass_source(ev.failing_pass)))
    if ev.reworded and len(ev.message_words) >= 3:
        # Where both sides fail, the line that words the error is the change itself; where
        # the other side passes, editing that line is no sign of the behaviour's change (a
        # rename that touches the message's line is not the fix).
        found.append(Item("the words of the error", 2.0, _words_on_lines(ev.message_words),
                          precise=True))
    for name in ev.check_names:
        found.append(Item(f"the failed check's {name}", 1.0, _names(name, "the failed check")))
    for name in ev.passes:
        if name == ev.failing_pass:
            continue  # the same piece of evidence, counted once
        found.append(Item(f"the case's pass {name}", 1.0, _pass_source(name)))
    share = 1.0 / max(1, len(ev.terms)) ** 0.5  # many terms: each one says less
    for name in ev.terms:
        found.append(Item(f"the case's {name}", 2.0 * share, _function_named(name)))
        found.append(Item(f"the case's {name}", 1.0 * share, _names(name, "the case calls it")))
        found.append(Item(f"a test of {name}", 1.5 * share, _test_names(name)))
    wanted = set().union(*(words(t) for t in ev.terms + ev.passes), set()) | \
        (words(ev.frame or "") | words(ev.failing_pass or ""))
    if wanted:
        found.append(Item("words of the case", 1.0, _subject_words(wanted)))
    if ev.direction == "fix":
        found.append(Item("a fix", 0.5, _fix_subject))
    return found


def _shared(matches: int) -> str:
    if matches == 1:
        return "the only commit"
    return "as does one other commit" if matches == 2 else f"as do {matches - 1} other commits"


def focus(commit: Commit, k: float = FOCUS_FIX) -> float:
    """1 for a commit of up to FOCUS_FILES source files; less the more else it changed:
    1 / (1 + k log2(files / FOCUS_FILES))."""
    sources = sum(1 for f in commit.files if not f.path.startswith(("tests/", "docs/")))
    if sources <= FOCUS_FILES:
        return 1.0
    return 1.0 / (1.0 + k * math.log2(sources / FOCUS_FILES))


def inert(commit: Commit) -> bool:
    """Whether every file the commit changed is outside what a release ships (tests, docs,
    CI, Markdown); a commit without files is not (nothing is known of it)."""
    return bool(commit.files) and all(f.path.startswith(_INERT) or f.path.endswith(".md")
                                      for f in commit.files)


def rank(commits: Iterable[Commit], ev: Evidence, skip: set[str] | None = None,
         limit: int = MAX_SUSPECTS) -> list[Suspect]:
    """The commits that show any evidence, best first (at most `limit`)."""
    # A commit that changes only tests, docs or CI changes nothing a release runs.
    candidates = [c for c in commits if c.sha not in (skip or set()) and not inert(c)]
    pieces = items(ev)
    total = sum(item.weight for item in pieces)
    if not pieces or not candidates:
        return []
    shown = {c.sha: [(item, reason) for item in pieces if (reason := item.test(c))]
             for c in candidates}
    for item in pieces:
        item.matches = sum(1 for found in shown.values() if any(i is item for i, _ in found))
    suspects = []
    for commit in candidates:
        found = shown[commit.sha]
        if not found:
            continue
        factor = focus(commit, FOCUS_FIX if ev.direction == "fix" and not ev.reworded
                       else FOCUS_OTHER)
        raw = sum(i.weight / (1.0 + math.log2(i.matches)) * (1.0 if i.precise else factor)
                  for i, _ in found) / total
        reasons = [f"{reason}: {item.label} ({_shared(item.matches)})" for item, reason in found]
        if factor < 1.0:
            reasons.append(f"weighed down x{factor:.2f}: it changes "
                           f"{len(commit.files)} files")
        suspects.append(Suspect(commit, raw, reasons))
    suspects.sort(key=lambda s: (-s.score, s.commit.date, s.commit.sha))
    return suspects[:limit]
