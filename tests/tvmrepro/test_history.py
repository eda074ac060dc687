"""A history read from a git repository and from a commit index says the same: a small repository
made here with real git (main, and a release branch with a cherry-pick), and the index a reader
of the index format writes for it (what each commit changed, written out by hand)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tvmrepro.errors import BadInput
from tvmrepro.history import GitHistory, IndexHistory, open_history, window
from tvmrepro.jobs.bisect.suspects import Evidence, rank

# Each main commit: subject, files written (path -> text), and what the index says it changed.
MAIN = [
    ("Add Lookup (#100)", {"src/a.cc": "int Lookup(int x) {\n  return x;\n}\n"},
     {"files": [{"path": "src/a.cc", "added": 3, "deleted": 0}], "functions": [],
      "identifiers": ["Lookup", "int", "return"]}),
    ("[Fix] Lookup keeps flat_map_ (#101)",
     {"src/a.cc": "int Lookup(int x) {\n  return flat_map_ + x;\n}\n",
      "tests/test_a.py": "def test_lookup_flat_map():\n    assert True\n"},
     {"files": [{"path": "src/a.cc", "added": 1, "deleted": 1},
                {"path": "tests/test_a.py", "added": 2, "deleted": 0}],
      "functions": ["Lookup"],
      "identifiers": ["True", "assert", "def", "flat_map_", "return", "test_lookup_flat_map"]}),
    ("[Docs] Say hello (#102)", {"docs/hello.md": "hello world\n"},
     {"files": [{"path": "docs/hello.md", "added": 1, "deleted": 0}], "functions": [],
      "identifiers": ["hello", "world"]}),
]
EVIDENCE = Evidence("fix", frame="Lookup", frame_file="src/a.cc", check_names=("flat_map_",))


def git(repo: Path, *args: str, when: int = 0) -> str:
    """Run git in `repo` with fixed names and dates (commit `when` hours into the day)."""
    stamp = f"2026-08-01T{10 + when:02d}:00:00+00:00"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The repository, its index file, and the commits: main's three, and the release branch
    (from the first) with the fix cherry-picked onto it."""
    repo = tmp_path_factory.mktemp("tvm")
    git(repo, "init", "--quiet", "--initial-branch=main")
    shas, rows = [], []
    for n, (subject, files, _) in enumerate(MAIN):
        for path, text in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "--quiet", "-m", subject, when=n)
        shas.append(git(repo, "rev-parse", "HEAD"))
    git(repo, "checkout", "--quiet", "-b", "v1", shas[0])
    git(repo, "cherry-pick", shas[1], when=5)
    picked = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "--quiet", "main")
    for sha, (subject, _, changed) in zip([*shas, picked], [*MAIN, MAIN[1]], strict=True):
        parents, date = git(repo, "log", "-1", "--format=%P|%cI", sha).split("|")
        rows.append({"sha": sha, "parents": parents.split(), "date": date, "subject": subject,
                     "pr": int(subject.rsplit("#", 1)[1].rstrip(")")),
                     "branches": ["v1"] if sha == picked else ["main"], "tags": [], **changed})
    index = repo.parent / "index.jsonl.gz"
    with gzip.open(index, "wt") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    return {"repo": repo, "index": index, "main": shas, "picked": picked}


def both(made: dict[str, Any]) -> list[Any]:
    return [IndexHistory(made["index"]), GitHistory(made["repo"])]


def test_git_and_the_index_give_one_window_and_the_same_suspects(made: dict[str, Any]) -> None:
    first, _, last = made["main"]
    windows = [window(h, first[:9], last[:9]) for h in both(made)]
    assert [w.to_json("h") for w in windows] == [windows[0].to_json("h")] * 2
    assert windows[0].commits == windows[1].commits  # files, functions, identifiers alike
    assert [c.sha for c in windows[0].commits] == [last, made["main"][1]]
    ranked = [[s.to_json() for s in rank(w.commits, EVIDENCE, w.picked)] for w in windows]
    assert ranked[0] == ranked[1]
    assert [s["pr"] for s in ranked[0]] == [101]
    assert "changes the function Lookup: the failing frame Lookup (the only commit)" in \
        ranked[0][0]["reasons"]


def test_a_release_branch_window_follows_the_graph_not_the_dates(made: dict[str, Any]) -> None:
    # v1's pick is newer than all of main, yet it is no news to main's head, and main's fix
    # is no news to v1: both sources say the fix is picked, and never suspect it.
    for history in both(made):
        span = window(history, made["picked"], made["main"][-1])
        assert [c.subject for c in span.commits] == [MAIN[2][0], MAIN[1][0]]
        assert span.picked == {made["main"][1]}
        assert rank(span.commits, EVIDENCE, span.picked) == []


def test_a_commit_newer_than_the_history_makes_the_window_open_ended(made: dict[str, Any]
                                                                     ) -> None:
    for history in both(made):
        span = window(history, f"g{made['main'][0][:9]}", "g0123456789")
        assert span.open_ended and len(span.commits) == 2
        assert "0123456789 is newer than the history" in (span.missing or "")
        assert span.compare_url == ("https://github.com/apache/tvm/compare/"
                                    f"{made['main'][0]}...0123456789")
        unknown = window(history, "g0123456789", made["main"][-1][:9])
        assert unknown.open_ended and unknown.commits == []


def test_a_url_is_cloned_once_into_the_home(made: dict[str, Any], tmp_path: Path) -> None:
    url = f"file://{made['repo']}"
    cloned = open_history(url, tmp_path)
    assert isinstance(cloned, GitHistory) and cloned.path.parent == tmp_path / "history"
    first, _, last = made["main"]
    assert window(cloned, first, last).commits == window(GitHistory(made["repo"]), first,
                                                         last).commits
    again = open_history(url, tmp_path)
    assert isinstance(again, GitHistory) and again.path == cloned.path


def test_a_history_that_is_not_one_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        open_history(tmp_path / "nothing", tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="neither a commit index nor a git repository"):
        open_history(tmp_path / "empty", tmp_path)


def test_a_history_that_fails_costs_the_suspects_only(made: dict[str, Any],
                                                      tmp_path: Path) -> None:
    import shutil

    from tvmrepro.jobs.bisect.windows import annotate

    broken = tmp_path / "broken"
    shutil.copytree(made["repo"], broken)
    blob = git(broken, "rev-parse", f"{made['main'][1]}:src/a.cc")
    (broken / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # git log -p fails on it
    first, last = made["main"][0], made["main"][-1]
    found = {"variant": "v", "transitions": [
        {"before": "a", "after": "b", "from": "bad", "to": "good", "candidates": []}]}
    runs = {"a": {"status": "error", "tvm": {"commit": first}},
            "b": {"status": "ok", "tvm": {"commit": last}}}
    annotate(found, runs.get, {}, GitHistory(broken))
    assert found["transitions"] == [
        {"before": "a", "after": "b", "from": "bad", "to": "good", "candidates": []}]
    annotate(found, runs.get, {}, GitHistory(made["repo"]))
    assert found["transitions"][0]["window"]["commits"] == 2


def test_history_update_indexes_a_clone_into_the_home_and_is_the_default_from_then_on(
        made: dict[str, Any], tmp_path: Path) -> None:
    import hashlib
    import sys

    from tvmrepro.history import HOME_INDEX, SHIPPED

    home = tmp_path / "home"
    environ = {k: v for k, v in os.environ.items() if k != "TVMREPRO_TVM_HISTORY"}
    environ["TVMREPRO_HOME"] = str(home)
    cli = str(Path(sys.executable).parent / "tvmrepro")
    shipped = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in SHIPPED.iterdir()}
    before = subprocess.run([cli, "env", "list", "--json"], env=environ, capture_output=True,
                            text=True, check=True)
    assert json.loads(before.stdout)["history"]["source"] == "the shipped commit index"
    proc = subprocess.run([cli, "history", "update", str(made["repo"]), "--json"], env=environ,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert (facts["path"], facts["commits"]) == (str(home / HOME_INDEX), 4)
    with gzip.open(home / HOME_INDEX, "rt") as handle:
        rows = {row["sha"]: row for row in map(json.loads, handle)}
    with gzip.open(made["index"], "rt") as handle:
        expected = {row["sha"]: row for row in map(json.loads, handle)}
    # What each commit changed, as the format says (the hand-written index's own facts).
    for sha, row in expected.items():
        assert {k: v for k, v in rows[sha].items() if k != "branches"} == \
            {k: v for k, v in row.items() if k != "branches"}, sha
    # The branches that reach each commit: v1 was made from main's first commit.
    assert rows[made["main"][0]]["branches"] == ["main", "v1"]
    assert rows[made["main"][2]]["branches"] == ["main"]
    assert rows[made["picked"]]["branches"] == ["v1"]
    # From then on it is the default: the same windows as the clone itself gives.
    history = open_history(None, home)
    assert history is not None and history.name == str(home / HOME_INDEX)
    for start, stop in ((made["main"][0], made["main"][2]), (made["picked"], made["main"][2])):
        ours, theirs = window(history, start, stop), window(GitHistory(made["repo"]), start, stop)
        assert [(c.sha, c.functions, c.identifiers) for c in ours.commits] == \
            [(c.sha, c.functions, c.identifiers) for c in theirs.commits]
        assert ours.picked == theirs.picked
    listed = json.loads(subprocess.run([cli, "env", "list", "--json"], env=environ,
                                       capture_output=True, text=True, check=True).stdout)
    newest = git(made["repo"], "log", "-1", "--format=%cI", made["picked"])  # the newest
    assert listed["history"] == {"name": str(home / HOME_INDEX), "newest": newest,
                                 "source": "made by `tvmrepro history update`"}
    said = subprocess.run([cli, "env", "list"], env=environ, capture_output=True, text=True,
                          check=True).stdout.splitlines()[-1]
    assert said == f"history: {home / HOME_INDEX} (made by `tvmrepro history update`), " \
                   f"newest commit {newest}"
    assert shipped == {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                       for p in SHIPPED.iterdir()}  # the package is not written


def test_history_update_refuses_what_is_not_a_clone(tmp_path: Path) -> None:
    from tvmrepro.environments import default_catalog
    from tvmrepro.jobs.bisect.history_index import update

    with pytest.raises(BadInput) as refused:
        update(tmp_path, tmp_path / "home", default_catalog())
    assert refused.value.field == "PATH" and str(tmp_path) in str(refused.value)
    assert not (tmp_path / "home").exists()
