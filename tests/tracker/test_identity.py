"""One issue's text says which issue it is: `gh issue view`'s header, a `# title` heading, the
issue's own address or `owner/repo#N`, and last the file's name (real apache/tvm bodies from
the corpus)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.cli import main
from tvmrepro.errors import BadInput
from tvmrepro.jobs.tracker.importing import import_file, import_markdown
from tvmrepro.jobs.tracker.triage_job import reports_of_request

CORPUS = Path(__file__).parent / "corpus" / "issues.json"


def _issue(number: int) -> dict[str, Any]:
    return next(i for i in json.loads(CORPUS.read_text()) if i["number"] == number)


def _exported(number: int) -> Any:
    return next(r for r in import_file(CORPUS) if r.number == number)


def gh_issue_view(issue: dict[str, Any], with_number: bool = True) -> str:
    """What `gh issue view N` prints when its output is not a terminal (cli/cli,
    pkg/cmd/issue/view/view.go, printRawIssuePreview; `number:` since 2.x)."""
    header = [f"title:\t{issue['title']}", f"state:\t{issue['state']}", "author:\tCookiee235",
              "labels:\tneeds-triage, type: bug", "comments:\t2", "assignees:\t", "projects:\t",
              "milestone:\t"] + ([f"number:\t{issue['number']}"] if with_number else [])
    return "\n".join(header) + "\n--\n" + issue["body"] + "\n"


def test_a_heading_and_the_issue_s_name_give_number_title_and_state(tmp_path: Path) -> None:
    issue = _issue(17348)
    path = tmp_path / "segfault-in-the-vm.md"
    path.write_text(f"# {issue['title']}\n\napache/tvm#17348 (closed)\n\n{issue['body']}")
    (report,) = import_file(path)
    assert (report.number, report.title, report.state) == (17348, issue["title"], "CLOSED")
    assert (report.url, report.repo) == (issue["url"], "apache/tvm")
    assert report.identity_from == {"title": "heading", "number": "text", "repo": "text",
                                    "url": "text", "state": "text"}
    # The report itself is the export's: the same script and quoted crash.
    exported = _exported(17348)
    assert (report.script, report.quoted_error_type) == (exported.script, "crash")
    ran = CliRunner().invoke(main, ["import", str(path), "--json"])
    assert ran.exit_code == 0, ran.stderr
    (printed,) = json.loads(ran.stdout)["reports"]
    assert (printed["number"], printed["state"], printed["identity_from"]["number"]) == \
        (17348, "CLOSED", "text")


def test_gh_issue_view_output_gives_number_title_and_state(tmp_path: Path) -> None:
    issue = _issue(17406)
    path = tmp_path / "issue.txt"
    path.write_text(gh_issue_view(issue))
    (report,) = import_file(path)
    assert (report.number, report.title, report.state) == (17406, issue["title"], "OPEN")
    assert set(report.identity_from.values()) == {"gh issue view"}
    exported = _exported(17406)
    assert (report.script, report.quoted_error) == (exported.script, exported.quoted_error)
    # gh before `number:`: the number from the file's name; the body's first heading ("###
    # Actual behavior") is not the title.
    older = tmp_path / "17406.md"
    older.write_text(gh_issue_view(issue, with_number=False))
    (report,) = import_file(older)
    assert (report.number, report.title, report.state) == (17406, issue["title"], "OPEN")
    assert report.identity_from["number"] == "file name"


def test_a_gh_header_with_another_state_names_it(tmp_path: Path) -> None:
    path = tmp_path / "pr.txt"
    path.write_text(gh_issue_view(_issue(17406) | {"state": "MERGED"}))
    with pytest.raises(BadInput) as caught:
        import_file(path)
    assert caught.value.field == f"{path}: state"
    with pytest.raises(BadInput) as caught:
        reports_of_request(["x", gh_issue_view(_issue(17406) | {"state": "MERGED"})])
    assert caught.value.field == "reports[1].state"


def test_an_issue_named_inside_a_sentence_is_another_issue(tmp_path: Path) -> None:
    issue = _issue(17239)
    path = tmp_path / "17239.md"
    path.write_text(f"# {issue['title']}\n\nThe same mistake as apache/tvm#17223, "
                    f"see https://github.com/apache/tvm/issues/17223.\n\n{issue['body']}")
    (report,) = import_file(path)
    assert (report.number, report.state, report.url) == (17239, None, None)


@pytest.mark.parametrize("heading, number, title", [
    ("[Bug] Missing PackedFunc · Issue #17357 · apache/tvm", 17357, "[Bug] Missing PackedFunc"),
    ("[Bug] Missing PackedFunc apache/tvm#17357", 17357, "[Bug] Missing PackedFunc"),
    ("#17357: [Bug] Missing PackedFunc", 17357, "[Bug] Missing PackedFunc"),
    ("[Bug] Missing PackedFunc", None, "[Bug] Missing PackedFunc"),
])
def test_a_heading_s_own_number(heading: str, number: int | None, title: str) -> None:
    report = import_markdown(f"# {heading}\n\n{_issue(17357)['body']}")
    assert (report.number, report.title) == (number, title)


def test_a_title_heading_is_not_a_section_of_the_body() -> None:
    # Under an "Error ..." section a block is output; a title that opens so is no section.
    body = "# Error in FuseOps after LambdaLift\n\n```python\nimport tvm\n```\n"
    assert import_markdown(body).script == "import tvm\n"


def test_a_triage_request_s_markdown_says_which_issue_it_is() -> None:
    issue = _issue(17348)
    (report,) = reports_of_request([f"# {issue['title']}\n\n{issue['url']}\n"
                                    f"State: closed\n\n{issue['body']}"])
    assert (report.number, report.state, report.title) == (17348, "CLOSED", issue["title"])
