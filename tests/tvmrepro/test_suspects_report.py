"""The Markdown report of a bisection with a history: each transition's window, its compare link,
what an open-ended one lacks, and its three best suspects with their PRs and reasons."""

from __future__ import annotations

from typing import Any

import pytest
from markdown_it import MarkdownIt

from tests.tvmrepro.transitions import STORED, suspects_of
from tvmrepro.api.views import Bisection
from tvmrepro.environments import Catalog
from tvmrepro.jobs.bisect.report import render_bisect


def report_of(*changes: dict[str, Any]) -> str:
    """The bisect section of a job whose transitions are these."""
    envs = [e for c in changes for e in (c["before"], c["after"])]
    found = {"oracle": "failure", "environments": envs, "variant": "v", "probes": [],
             "transitions": list(changes), "verdict": "non_monotonic", "strategy": "all",
             "repeat": 1, "progress": {"done": 2, "total": 2}, "reference": None,
             "finished": True}
    return "\n".join(render_bisect(Bisection.model_validate(found), [], {}, Catalog(())))


def test_the_report_names_the_window_links_compare_and_the_top_three() -> None:
    text = report_of(suspects_of(STORED["transitions"][0]))
    html = MarkdownIt("commonmark").render(text)
    assert ("Commit window: 89 commits from <code>7e93b733be</code> to <code>c7ba0735a4</code>"
            in html)
    assert ('<a href="https://github.com/apache/tvm/compare/7e93b733bea2768ccaa02466dab0c3360c1'
            '32110...c7ba0735a4f346c67b761e1fde38a68a60be8adb">compare on GitHub</a>') in html
    links = [line for line in text.splitlines() if line.startswith("  - Suspect ")]
    assert len(links) == 3
    assert links[0].startswith("  - Suspect 1 (score 0.31): "
                               "[#19683](https://github.com/apache/tvm/pull/19683) "
                               "`[Fix] CommReduce could handle 0-dim data (#19683)`: ")
    assert "the file of the failing frame CommReduce" in links[0]
    assert "Open-ended" not in text


def test_an_open_ended_window_says_so_and_what_is_missing() -> None:
    text = report_of(suspects_of(STORED["transitions"][2]))
    assert "  - Open-ended: `the later release's commit fa3a688fb is newer than the history" \
        in text
    assert "[#20116](https://github.com/apache/tvm/pull/20116)" in text


def test_a_reason_quoting_the_case_stays_code() -> None:
    change = {"before": "a", "after": "b", "from": "bad", "to": "good", "candidates": [],
              "window": {"from_commit": "1" * 40, "to_commit": "2" * 40, "commits": 1,
                         "open_ended": False, "compare_url": "https://github.com/apache/tvm/"
                                                            "compare/1...2", "picked": 0},
              "suspects": [{"sha": "3" * 40, "pr": 7, "subject": "[x](http://evil) @someone",
                            "url": "https://github.com/apache/tvm/pull/7", "score": 0.5,
                            "reasons": ["changes lines naming ![i](http://evil/i.png)"]}]}
    html = MarkdownIt("commonmark").render(report_of(change))
    assert "http://evil" not in html.replace("<code>[x](http://evil) @someone</code>", "") \
        .replace("<code>changes lines naming ![i](http://evil/i.png)</code>", "")


def test_the_command_lists_the_window_and_three_suspects_below_its_table(
        capsys: pytest.CaptureFixture[str]) -> None:
    from cli.commands.bisect import show_bisect

    change = suspects_of(STORED["transitions"][2])
    found = {"probes": [], "transitions": [change], "verdict": "changed", "oracle": "output",
             "environments": [change["before"], change["after"]], "variant": "v",
             "strategy": "all", "repeat": 1, "progress": {"done": 2, "total": 2},
             "finished": True}
    show_bisect(Bisection.model_validate(found), "case", as_json=False)
    text = capsys.readouterr().out
    assert "  window: 35 commits, https://github.com/apache/tvm/compare/" in text
    assert "  open-ended: the later release's commit fa3a688fb is newer" in text
    assert "  suspect 1: 0.43 [BugFix][TE] Initialize nested reductions at the outermost " \
        "reduction scope (#20116) https://github.com/apache/tvm/pull/20116\n" in text
    assert "suspect 3:" in text and "suspect 4:" not in text
