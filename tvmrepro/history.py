"""apache/tvm's history as data: the commits between two releases, with what each one changed.

A history is read from one of two sources that say the same things:
- a commit index (JSON lines, gzip allowed): one object per commit with `sha`, `parents`,
  `date`, `subject`, `pr`, `branches`, `tags`, `files` ({path, added, deleted}), `functions`
  (the function names in the hunk headers of its diff) and `identifiers` (every identifier of
  3+ characters on its diff's added or removed lines);
- a git repository of apache/tvm (a clone, or a URL cloned once into the home), read with
  `git log -p -U0 --numstat`, the same facts taken the same way (`parse_patch`).

A release's commit (`tvm._version.commit_id`, e.g. `g7b5acb32b`) names where it was built.
Release commits sit on release branches (cherry-picks), so a window is found on the graph:
the commits reachable from the later release's commit and not from the earlier one's. A window
commit whose change the earlier release already has as a cherry-pick (same PR, or the same
subject) is counted as `picked`: it is no news to the earlier release.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from tvmrepro.errors import BadInput

REPOSITORY_URL = "https://github.com/apache/tvm"
MAIN = "main"
# The commit index the project ships (tvmrepro/data/README.md), used when no history is named:
# a clone anywhere, or an installed package, has windows and suspects without a setting.
SHIPPED = Path(__file__).resolve().parent / "data"
# Where `tvmrepro history update` writes the index it makes from a clone, in the home: from then
# on it is the default in place of the shipped one (tvmrepro/jobs/bisect/history_index.py).
HOME_INDEX = Path("history") / "apache-tvm-commits.jsonl.gz"
INDEX_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz")
_PR = re.compile(r"\(#(\d+)\)\s*$")
_HUNK = re.compile(r"^@@ [^@]* @@ ?(.*)$")
_FUNCTION = re.compile(r"([A-Za-z_~][\w:~]*)\s*\(")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_SHORT = re.compile(r"^g?([0-9a-fA-F]{7,40})$")


@dataclass(frozen=True)
class FileChange:
    """One file a commit changed, with its line counts (None for a binary file)."""

    path: str
    added: int | None
    deleted: int | None

    @property
    def lines(self) -> int:
        """Lines added and removed."""
        return (self.added or 0) + (self.deleted or 0)


@dataclass(frozen=True)
class Commit:
    """One commit and what it changed (no code)."""

    sha: str
    parents: tuple[str, ...]
    date: str
    subject: str
    pr: int | None
    files: tuple[FileChange, ...] = ()
    functions: frozenset[str] = frozenset()
    identifiers: frozenset[str] = frozenset()
    branches: tuple[str, ...] = field(default=(), compare=False)

    @property
    def url(self) -> str:
        """The PR's page, else the commit's."""
        return (f"{REPOSITORY_URL}/pull/{self.pr}" if self.pr
                else f"{REPOSITORY_URL}/commit/{self.sha}")

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Commit:
        """A commit from a row of the index."""
        subject = row.get("subject") or ""
        return cls(sha=row["sha"], parents=tuple(row.get("parents") or ()),
                   date=row.get("date") or "", subject=subject,
                   pr=row.get("pr") if row.get("pr") is not None else pr_of(subject),
                   files=tuple(FileChange(f["path"], f.get("added"), f.get("deleted"))
                               for f in row.get("files") or ()),
                   functions=frozenset(row.get("functions") or ()),
                   identifiers=frozenset(row.get("identifiers") or ()),
                   branches=tuple(row.get("branches") or ()))


def pr_of(subject: str) -> int | None:
    """The PR number of a subject's trailing `(#NNNNN)`."""
    match = _PR.search(subject)
    return int(match[1]) if match else None


def parse_patch(lines: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(functions, identifiers) of a `-U0` patch: every `name(` of the hunk headers, and every
    identifier of 3+ characters on the added and removed lines (the file headers aside)."""
    functions: set[str] = set()
    identifiers: set[str] = set()
    for line in lines:
        if line.startswith("@@"):
            match = _HUNK.match(line)
            functions.update(_FUNCTION.findall(match[1]) if match else ())
        elif line.startswith(("+++", "---")):
            continue
        elif line.startswith(("+", "-")):
            identifiers.update(_IDENTIFIER.findall(line[1:]))
    return frozenset(functions), frozenset(identifiers)


@dataclass
class Window:
    """The commits of one release transition, newest first."""

    from_commit: str | None
    to_commit: str | None
    commits: list[Commit] = field(default_factory=list)
    picked: set[str] = field(default_factory=set)  # shas the earlier release has as picks
    open_ended: bool = False
    missing: str | None = None  # in words: what the history lacks

    @property
    def compare_url(self) -> str | None:
        """GitHub's comparison of the two releases' commits."""
        if not self.from_commit or not self.to_commit:
            return None
        return f"{REPOSITORY_URL}/compare/{self.from_commit}...{self.to_commit}"

    def to_json(self, history: str) -> dict[str, Any]:
        """The transition's `window` field (docs/contract.md, "Commit windows and suspects")."""
        found: dict[str, Any] = {
            "from_commit": self.from_commit, "to_commit": self.to_commit,
            "commits": len(self.commits), "open_ended": self.open_ended,
            "compare_url": self.compare_url, "picked": len(self.picked), "history": history}
        return found | ({"missing": self.missing} if self.missing else {})


class History(Protocol):
    """Where commits come from: an index file or a git repository."""

    name: str

    def __hash__(self) -> int:
        """Histories are hashed by identity (their windows are cached)."""

    def resolve(self, ref: str) -> str | None:
        """The full sha of a (short, maybe g-prefixed) commit id, or None if unknown."""

    def end(self) -> Commit | None:
        """The newest commit of main: where an open-ended window stops."""

    def between(self, include: str, exclude: str | None, changes: bool = True) -> list[Commit]:
        """Commits reachable from `include` and not from `exclude`, newest first (without
        their files, functions and identifiers when not `changes`)."""

    def newest(self) -> str | None:
        """The date of its newest commit (how fresh it is), or None when it has none."""


def newest_first(commits: Iterable[Commit]) -> list[Commit]:
    """Commits by committer date, newest first (then by sha: one order for every source)."""
    return sorted(commits, key=lambda c: (_when(c.date), c.sha), reverse=True)


def _when(date: str) -> float:
    try:
        return datetime.fromisoformat(date).timestamp()
    except ValueError:
        return 0.0


def short_id(commit_id: str | None) -> str | None:
    """A wheel's commit id without git-describe's `g` (`g7b5acb32b` -> `7b5acb32b`)."""
    match = _SHORT.match(commit_id.strip()) if commit_id else None
    return match[1].lower() if match else None


def window(history: History, before: str | None, after: str | None) -> Window:
    """The commits of the transition from `before`'s commit to `after`'s (docs/contract.md)."""
    before_id, after_id = short_id(before), short_id(after)
    start = history.resolve(before_id) if before_id else None
    stop = history.resolve(after_id) if after_id else None
    found = Window(start or before_id, stop or after_id)
    if start is not None and stop is not None:
        found.commits = history.between(stop, start)
        found.picked = _picked(history, found.commits, start, stop)
        return found
    found.open_ended = True
    end = history.end()
    ending = f"{end.sha[:10]} ({end.date[:10]})" if end else "nothing"
    if start is None:  # nothing is known of what the earlier release had
        gaps = [f"the earlier release's commit {before_id or '(unknown)'}"]
        if stop is None:
            gaps.append(f"the later release's commit {after_id or '(unknown)'}")
        found.missing = (f"{' and '.join(gaps)} {'is' if len(gaps) == 1 else 'are'} not in the "
                         f"history, which ends at {ending}: no commit of this window is known")
        return found
    found.missing = (f"the later release's commit {after_id or '(unknown)'} is newer than the "
                     f"history, which ends at {ending}: the window runs from {start[:10]} to "
                     "the history's end; commits after it and the later release branch's own "
                     "cherry-picks are missing")
    if end is not None:
        found.commits = history.between(end.sha, start)
        found.picked = _picked(history, found.commits, start, end.sha)
    return found


def _picked(history: History, commits: list[Commit], start: str, stop: str) -> set[str]:
    """The window's commits that the earlier release already has as cherry-picks."""
    before_only = history.between(start, stop, changes=False)
    subjects = {c.subject for c in before_only}
    prs = {c.pr for c in before_only if c.pr}
    return {c.sha for c in commits if c.subject in subjects or (c.pr is not None and c.pr in prs)}


# The index ------------------------------------------------------------------------------

class IndexHistory:
    """A commit index: JSON lines (gzip allowed), one commit per line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        self.commits = _load_index(path, path.stat().st_mtime_ns)
        self._main_tip = _main_tip(self.commits)

    def resolve(self, ref: str) -> str | None:
        """The one sha starting with `ref`, else None."""
        ref = ref.lower()
        if ref in self.commits:
            return ref
        matches = [sha for sha in self.commits if sha.startswith(ref)]
        return matches[0] if len(matches) == 1 else None

    def end(self) -> Commit | None:
        """The tip of main."""
        return self.commits.get(self._main_tip) if self._main_tip else None

    def newest(self) -> str | None:
        """The newest commit date of the index (any branch)."""
        dates = [c.date for c in self.commits.values() if c.date]
        return max(dates, key=_when) if dates else None

    def between(self, include: str, exclude: str | None, changes: bool = True) -> list[Commit]:
        """The graph walk, newest first."""
        found = self._reachable(include) - (self._reachable(exclude) if exclude else set())
        return newest_first(self.commits[sha] for sha in found)

    def _reachable(self, sha: str) -> set[str]:
        seen: set[str] = set()
        todo = [sha]
        while todo:
            current = todo.pop()
            if current in seen or current not in self.commits:
                continue
            seen.add(current)
            todo.extend(self.commits[current].parents)
        return seen


@lru_cache(maxsize=4)
def _load_index(path: Path, mtime_ns: int) -> dict[str, Commit]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    commits: dict[str, Commit] = {}
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    commit = Commit.from_json(json.loads(line))
                except (ValueError, KeyError, TypeError) as exc:
                    raise BadInput("history", f"{path} line {number} is not a commit: {exc}"
                                   ) from exc
                commits[commit.sha] = commit
    except OSError as exc:
        raise BadInput("history", f"cannot read the commit index {path}: {exc}") from exc
    return commits


def _main_tip(commits: dict[str, Commit]) -> str | None:
    """The commit of main that no other commit of main has as its parent."""
    on_main = {sha for sha, c in commits.items() if MAIN in c.branches} or set(commits)
    parents = {p for sha in on_main for p in commits[sha].parents}
    tips = sorted((commits[sha] for sha in on_main - parents), key=lambda c: c.date)
    return tips[-1].sha if tips else None


# A git repository -------------------------------------------------------------------------

LOG_FORMAT = "%x00%H%x1f%P%x1f%cI%x1f%s"


class GitHistory:
    """A git repository of apache/tvm, read with git itself."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        if self._git("rev-parse", "--git-dir", check=False) is None:
            raise BadInput("history", f"{path} is neither a commit index nor a git repository")

    def _git(self, *args: str, check: bool = True) -> str | None:
        proc = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True,
                              text=True, errors="replace", check=False)
        if proc.returncode != 0:
            if check:
                raise BadInput("history", f"git {args[0]} failed in {self.path}: "
                                          f"{proc.stderr.strip()[-500:]}")
            return None
        return proc.stdout

    def resolve(self, ref: str) -> str | None:
        """git's own resolution of a commit id."""
        out = self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return out.strip() if out else None

    def end(self) -> Commit | None:
        """main (or origin/main, or HEAD)."""
        for ref in (MAIN, f"origin/{MAIN}", "HEAD"):
            sha = self.resolve(ref)
            if sha:
                out = self._git("log", "-1", f"--format={LOG_FORMAT}", sha) or ""
                return parse_entry(out.split("\x00")[1])
        return None

    def newest(self) -> str | None:
        """The newest committer date of any branch of the repository."""
        out = self._git("log", "-1", "--format=%cI", "--branches", "--remotes", check=False)
        return (out or "").strip() or None

    def between(self, include: str, exclude: str | None, changes: bool = True) -> list[Commit]:
        """`git log -p -U0 --numstat include ^exclude`, newest first."""
        patch = ["-p", "-U0", "--numstat", "--no-color", "--no-ext-diff"] if changes else []
        args = ["log", *patch, f"--format={LOG_FORMAT}", include]
        if exclude:
            args.append(f"^{exclude}")
        out = self._git(*args) or ""
        return newest_first(parse_entry(entry) for entry in out.split("\x00")[1:])


def parse_entry(entry: str) -> Commit:
    """One commit of `git log --format=... --numstat -p` output."""
    header, _, body = entry.partition("\n")
    sha, parents, date, subject = header.split("\x1f", 3)
    lines = body.split("\n")
    files: list[FileChange] = []
    patch_start = len(lines)
    for index, line in enumerate(lines):
        if line.startswith("diff --git"):
            patch_start = index
            break
        parts = line.split("\t", 2)
        if len(parts) == 3:
            added, deleted, path = parts
            files.append(FileChange(path, None if added == "-" else int(added),
                                    None if deleted == "-" else int(deleted)))
    functions, identifiers = parse_patch(lines[patch_start:])
    return Commit(sha=sha, parents=tuple(parents.split()), date=date, subject=subject,
                  pr=pr_of(subject), files=tuple(files), functions=functions,
                  identifiers=identifiers)


# Opening one ----------------------------------------------------------------------------

def open_history(spec: str | Path | None, home: Path | None = None) -> History | None:
    """The history a setting or flag names: an index file, a folder holding one, a git
    repository, or a URL cloned once into `home`; when none is named, the index that
    `tvmrepro history update` wrote into `home`, else the shipped one. BadInput names `history`
    when the one named cannot be read."""
    if spec is None or str(spec) == "":
        if home is not None and (home / HOME_INDEX).is_file():
            return IndexHistory(home / HOME_INDEX)
        return _index_in(SHIPPED) if SHIPPED.is_dir() else None
    text = str(spec)
    if "://" in text or text.startswith("git@"):
        if home is None:
            raise BadInput("history", "a history URL needs a home to clone it into")
        return GitHistory(clone_once(text, home / "history"))
    path = Path(text).expanduser()
    if not path.exists():
        raise BadInput("history", f"{path} does not exist")
    if path.is_file():
        return IndexHistory(path)
    if (path / ".git").exists() or (path / "HEAD").is_file():
        return GitHistory(path)
    found = _index_in(path)
    if found is None:
        raise BadInput("history", f"{path} holds neither a commit index nor a git repository")
    return found


def history_source(spec: str | Path | None, home: Path | None = None) -> str:
    """Where the history of `spec` (a flag's or setting's, None: the default) comes from, in
    words."""
    if spec is not None and str(spec) != "":
        return "named"
    if home is not None and (home / HOME_INDEX).is_file():
        return "made by `tvmrepro history update`"
    return "the shipped commit index"


def _index_in(folder: Path) -> IndexHistory | None:
    files = sorted(p for p in folder.iterdir() if p.name.endswith(INDEX_SUFFIXES))
    return IndexHistory(files[0]) if files else None


def clone_once(url: str, into: Path) -> Path:
    """A bare clone of `url` under `into` (made once, under a lock; later calls reuse it)."""
    into.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^\w.-]+", "_", url.rstrip("/").split("://")[-1])
    target = into / name
    with open(into / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "HEAD").is_file():
            proc = subprocess.run(["git", "clone", "--quiet", "--bare", url, str(target)],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise BadInput("history", f"cannot clone {url}: {proc.stderr.strip()[-500:]}")
    return target
