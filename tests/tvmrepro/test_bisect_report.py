"""The bisect section of the Markdown report, on a constructed bisect object."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from markdown_it import MarkdownIt

from tests.tvmrepro.observations import ENVS, observe, result
from tvmrepro.api.views import Bisection, RunView
from tvmrepro.environments import Catalog
from tvmrepro.jobs.bisect.logic import Options, evaluate
from tvmrepro.jobs.bisect.report import render_bisect, reproduce_command
from tvmrepro.lifecycle import RunState


def section_of(found: dict[str, Any]) -> list[str]:
    """The section of a job with this bisect object, a run per probe and a script."""
    runs = [RunView(id=f"r{i}", variant="v", environment=p["environment"], state=RunState.DONE,
                    cached=False, deliveries=1,
                    result={"tvm": {"version": p["environment"], "libinfo": {"USE_LLVM": "ON"}}})
            for i, p in enumerate(found["probes"])]
    return render_bisect(Bisection.model_validate(found), runs, {"script": "import tvm\n"},
                         Catalog(()))


def test_the_section_renders_with_its_tables_and_a_command_that_parses_back() -> None:
    statuses = ["error", "error", "incompatible", "ok", "ok", "crash", "ok", "ok"]
    oracle = "regex:Cannot find | other's"
    found, _ = evaluate(Options(ENVS, "v", oracle),
                        observe({e: result(s, message="Cannot find | other's" if s != "ok"
                                           else None)
                                 for e, s in zip(ENVS, statuses, strict=True)}))
    text = "\n".join(section_of(found))
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert sum(t.type == "table_open" for t in tokens) == 2  # probes, environments
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "non_monotonic" in html and "<code>e2</code>" in html
    saved = re.search(r"<summary>case.json</summary>\n\n```json\n(.*?)\n```", text, re.S)
    assert saved is not None and json.loads(saved.group(1)) == {"script": "import tvm\n"}
    command = shlex.split(reproduce_command(Bisection.model_validate(found)))
    assert command[command.index("--oracle") + 1] == oracle
    assert [command[i + 1] for i, w in enumerate(command) if w == "--env"] == ENVS


def test_a_job_that_is_not_a_bisection_has_no_section() -> None:
    assert render_bisect(None, [], {}) == []


def test_an_oracle_over_its_budget_is_named_in_the_section() -> None:
    found, upcoming = evaluate(Options(ENVS, "v", "regex:(a+)+$", strategy="binary"),
                               observe({e: result("error", message="a" * 5000 + "!")
                                        for e in ENVS[:1] + ENVS[-1:]}))
    assert upcoming == [] and found["verdict"] == "inconclusive"
    text = "\n".join(section_of(found))
    assert "The oracle judged no run: `regex:(a+)+$ took longer than its budget" in text
