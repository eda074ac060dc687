"""The bot's pure parts: which lines of a comment are commands, who may ask them, the fix's
state machine, the labels a check gives, and comments that show run text in code only."""

from __future__ import annotations

import re

import pytest

from tvmrepro.bot.checks import labels_of
from tvmrepro.bot.commands import Asked, asked_in, issue_number, refusal, releases
from tvmrepro.bot.render import follower_body, no_code_body, tracking_body
from tvmrepro.bot.state import BotState, Check, Inbox, Row, count_check, wants_confirmation
from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings

SETTINGS = Settings()
ENVS = ["tvm-0.25.0.post1-cpu", "tvm-0.26.0-cpu", "tvm-0.27.0.post1-cpu"]
EVIL = "@someone ## Heading [x](https://evil.example) <img src=x> | `tick` ignore previous"


def check(verdict: str, since: str | None = None, signature: str | None = None,
          duplicates: tuple[int, ...] = ()) -> Check:
    return Check(job="a" * 32, run_job="b" * 32, verdict=verdict, since=since,
                 environments=ENVS, signature=signature, duplicates=list(duplicates),
                 rows=[Row(env=env, status="error", stage="script", signature=signature)
                       for env in ENVS], reproducer=f"raise ValueError({EVIL!r})\n",
                 reproducer_env=ENVS[-1])


def test_commands_are_lines_of_prose_addressed_to_the_bot() -> None:
    body = ("Thanks!\n@tvm-repro run 0.26.0, 0.27.0.post1\n> @tvm-repro close\n"
            "```\n@tvm-repro undup\n```\n  @TVM-REPRO Bisect\nask @tvm-repro test later\n"
            "@tvm-reproduce run\n")
    assert asked_in(body, "tvm-repro") == [Asked("run", ("0.26.0", "0.27.0.post1")),
                                           Asked("bisect", ())]
    assert len(asked_in("@tvm-repro run\n" * 9, "tvm-repro")) == 5


@pytest.mark.parametrize("name, association, login, allowed", [
    ("run", "MEMBER", "m", True), ("run", "OWNER", "m", True),
    ("run", "COLLABORATOR", "m", True), ("run", "NONE", "author", True),
    ("run", "CONTRIBUTOR", "passer-by", False), ("close", "NONE", "author", False),
    ("dup", "MEMBER", "m", True), ("undup", "FIRST_TIMER", "author", False)])
def test_who_may_ask(name: str, association: str, login: str, allowed: bool) -> None:
    assert (refusal(name, association, login, "Author", SETTINGS) is None) == allowed


def test_the_deployment_chooses_the_associations() -> None:
    owners = Settings(github_allowed_associations="OWNER")
    assert refusal("run", "MEMBER", "m", None, owners) is not None
    assert refusal("run", "owner", "m", None, owners) is None


def test_releases_and_issues_named_by_commands() -> None:
    catalog = default_catalog()
    assert releases(("0.26.0", "tvm-0.27.0.post1-cpu", "v0.26.0"), catalog) == [
        "tvm-0.26.0-cpu", "tvm-0.27.0.post1-cpu"]
    with pytest.raises(ValueError, match="no release '9.9'"):
        releases(("9.9",), catalog)
    assert issue_number(("#17348",), 20200) == 17348
    for bad in ((), ("#20200",), ("x",), ("#0",)):
        with pytest.raises(ValueError):
            issue_number(bad, 20200)


def test_a_fix_is_confirmed_after_n_passing_checks_and_withdrawn_by_a_failure() -> None:
    state = count_check(BotState(), check("reproduces"))
    assert (state.passes, state.failing_again) == (0, None)
    state = count_check(state, check("fixed", ENVS[-1]))
    assert state.passes == 1 and not wants_confirmation(state, 2)
    state = count_check(state, check("no_code"))  # measures nothing: changes nothing
    assert state.passes == 1
    state = count_check(state, check("never_reproduced"))  # passes everywhere after a failure
    assert state.passes == 2 and wants_confirmation(state, 2)
    state = state.model_copy(update={"confirm_comment": 7})
    assert not wants_confirmation(state, 2)  # asked once
    state = count_check(state, check("reproduces"))
    assert state.passes == 0 and state.confirm_comment is None
    assert state.failing_again and "after 2 passing check(s)" in state.failing_again
    # Never failing is no fix.
    assert count_check(BotState(), check("never_reproduced")).passes == 0


def test_labels_come_from_the_verdict_and_the_catalog() -> None:
    catalog = default_catalog()
    assert labels_of(check("reproduces", duplicates=(1,)), True, catalog) == [
        "reproduces-on-latest", "likely-duplicate"]
    assert labels_of(check("reproduces", duplicates=(1,)), False, catalog) == [
        "reproduces-on-latest"]
    assert labels_of(check("fixed", ENVS[-1]), True, catalog) == ["fixed-on-0.27.0.post1"]
    assert labels_of(check("no_code"), True, catalog) == ["needs-reproducer"]
    assert labels_of(check("incompatible"), True, catalog) == []
    assert labels_of(None, True, catalog) == []


def outside_code(markdown: str) -> str:
    """The text of a comment outside its code blocks and code spans."""
    markdown = re.sub(r"^(`{3,}).*?^\1`*$", "", markdown, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", markdown)


def test_run_text_renders_in_code_only() -> None:
    inbox = Inbox(repo="apache/tvm", number=5, title=EVIL)
    for body in (tracking_body(check("reproduces", signature=EVIL), inbox, BotState(), [3],
                               "http://repro.example"),
                 follower_body(2, None, check("reproduces", signature=EVIL),
                               "https://github.com/apache/tvm"),
                 no_code_body(EVIL)):
        shown = outside_code(body)
        assert "evil.example" in body and "evil.example" not in shown, body
        assert not [w for w in ("@someone", "## Heading", "<img", "ignore") if w in shown]
