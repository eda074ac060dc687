"""A commit index made from a local clone of apache/tvm (`tvmrepro history update PATH`).

The index is the format of tvmrepro/data/README.md, read by `tvmrepro.history.IndexHistory`:
one JSON object per commit with sha, parents, date, subject, pr, branches, tags, files,
functions and identifiers. The facts come from `git log -p -U0 --numstat` read the way
`GitHistory` reads a window (`parse_entry`), so a window from the index and one from the
clone agree. `branches` says which of the clone's branches reach a commit (remote ones named
without their remote, as `main` or a release branch `vX.Y.Z`): the index's end is the tip of main.

It is written into the home (`HOME_INDEX`), whole or not at all, and from then on it is the
default history of `bisect`, the service and `env list` (a flag or TVMREPRO_TVM_HISTORY still
comes first); the shipped index is never touched.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tvmrepro.environments import Catalog, Environment
from tvmrepro.errors import BadInput
from tvmrepro.history import HOME_INDEX, LOG_FORMAT, MAIN, Commit, newest_first, parse_entry

# The index starts this long before the oldest pinned release's branch left main: the windows
# between pinned releases need every commit after that point (main's and the release branches'
# cherry-picks), and a commit's date may be a little older than where it landed.
MARGIN = timedelta(days=30)


@dataclass(frozen=True)
class Built:
    """What an update wrote: where, how many commits, their span, and from when it was asked."""

    path: Path
    commits: int
    oldest: str | None
    newest: str | None
    since: str | None


def git(repo: Path, *args: str) -> str:
    """git's output in `repo`; BadInput naming PATH when it fails."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          errors="replace", check=False)
    if proc.returncode != 0:
        raise BadInput("PATH", f"git {args[0]} failed in {repo}: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def branches(repo: Path) -> dict[str, str]:
    """The clone's branches, local and remote-tracking: name (without its remote) -> ref."""
    found: dict[str, str] = {}
    out = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes")
    for ref in out.split():
        if ref.startswith("refs/heads/"):
            found[ref.removeprefix("refs/heads/")] = ref  # a local branch comes first
        elif not ref.endswith("/HEAD"):
            found.setdefault(ref.removeprefix("refs/remotes/").split("/", 1)[-1], ref)
    return found


def tags(repo: Path) -> dict[str, list[str]]:
    """Commit sha -> the tags that point at it (annotated tags peeled)."""
    found: dict[str, list[str]] = {}
    out = git(repo, "for-each-ref", "--format=%(objectname) %(*objectname) %(refname:short)",
              "refs/tags")
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            found.setdefault(parts[1], []).append(parts[2])
        elif len(parts) == 2:
            found.setdefault(parts[0], []).append(parts[1])
    return found


def release_tag(env: Environment) -> str:
    """apache/tvm's tag of a pinned release (X.Y.ZrcN -> vX.Y.Z.rcN, X.Y.Z.postN ->
    vX.Y.Z.postN)."""
    version = env.version
    text = f"v{version.major}.{version.minor}.{version.micro}"
    if version.pre:
        text += f".{version.pre[0]}{version.pre[1]}"
    return text + (f".post{version.post}" if version.post is not None else "")


def default_since(repo: Path, catalog: Catalog, refs: dict[str, str]) -> str | None:
    """MARGIN before the oldest pinned release's branch left main (the merge base of its tag and
    main, else its tag); None (the whole history) where the clone has no such tag."""
    oldest = min(catalog.environments, key=lambda env: env.version, default=None)
    if oldest is None:
        return None
    tag = release_tag(oldest)
    if not git(repo, "tag", "--list", tag).strip():
        return None
    point = tag
    if MAIN in refs:
        base = subprocess.run(["git", "-C", str(repo), "merge-base", tag, refs[MAIN]],
                              capture_output=True, text=True, check=False)
        point = base.stdout.strip() or tag
    when = datetime.fromisoformat(git(repo, "log", "-1", "--format=%cI", point).strip())
    return (when - MARGIN).isoformat()


def entries(repo: Path, refs: list[str], since: str | None) -> Iterator[Commit]:
    """Every commit the refs reach (since `since`), read from one streamed `git log -p`."""
    args = ["git", "-C", str(repo), "log", "-p", "-U0", "--numstat", "--no-color",
            "--no-ext-diff", f"--format={LOG_FORMAT}", *refs]
    if since:
        args.append(f"--since={since}")
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace") as proc:
        assert proc.stdout is not None
        entry: list[str] = []
        for line in proc.stdout:
            if line.startswith("\x00") and entry:
                yield parse_entry("".join(entry).rstrip("\n"))
                entry = []
            entry.append(line[1:] if line.startswith("\x00") else line)
        if entry:
            yield parse_entry("".join(entry).rstrip("\n"))
        error = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise BadInput("PATH", f"git log failed in {repo}: {error.strip()[-500:]}")


def membership(repo: Path, refs: dict[str, str], shas: set[str]) -> dict[str, list[str]]:
    """Commit sha -> the branches that reach it (only of `shas`)."""
    found: dict[str, list[str]] = {}
    for name in sorted(refs):
        for sha in git(repo, "rev-list", refs[name]).split():
            if sha in shas:
                found.setdefault(sha, []).append(name)
    return found


def row(commit: Commit, on: list[str], tagged: list[str]) -> dict[str, Any]:
    """A commit as a line of the index."""
    return {"sha": commit.sha, "parents": list(commit.parents), "date": commit.date,
            "subject": commit.subject, "pr": commit.pr, "branches": on, "tags": sorted(tagged),
            "files": [{"path": f.path, "added": f.added, "deleted": f.deleted}
                      for f in commit.files],
            "functions": sorted(commit.functions), "identifiers": sorted(commit.identifiers)}


def update(repo: Path, home: Path, catalog: Catalog, since: str | None = None) -> Built:
    """Make the index of the clone at `repo` (its commits since `since`, default_since when
    None) and write it into `home`; what was written."""
    if not repo.is_dir():
        raise BadInput("PATH", f"{repo} is not a directory (a clone of apache/tvm)")
    git(repo, "rev-parse", "--git-dir")
    refs = branches(repo)
    if not refs:
        raise BadInput("PATH", f"{repo} has no branch: not a clone of apache/tvm")
    since = since or default_since(repo, catalog, refs)
    commits = newest_first(entries(repo, sorted(set(refs.values())), since))
    if not commits:
        raise BadInput("--since", f"no commit of {repo} is newer than {since}")
    on = membership(repo, refs, {c.sha for c in commits})
    tagged = tags(repo)
    target = home / HOME_INDEX
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    with gzip.open(partial, "wt", encoding="utf-8") as out:
        for commit in commits:
            out.write(json.dumps(row(commit, on.get(commit.sha, []),
                                     tagged.get(commit.sha, []))) + "\n")
    partial.replace(target)  # whole or absent for a reader (the service reads it as it runs)
    return Built(target, len(commits), commits[-1].date, commits[0].date, since)
