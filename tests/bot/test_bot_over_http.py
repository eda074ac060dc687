"""The GitHub bot through a real service: the API (gunicorn) and a Celery worker serving two of
the default releases (real TVM), the embedded store and broker, and GitHubStandIn for GitHub's
REST endpoints (an App's installation token asked with a real JWT). Deliveries are recorded
payloads (tests/cases/github), signed with real HMAC-SHA256.

The tracker corpus's export (tests/tracker/corpus), every report delivered as an opened issue,
gets one comment each whose verdict and matrix (status, stage, signature on each release) are
what a triage of the same export gives (served whole from the cache the bot's checks filled),
and what plain TVM measured; an edit edits that comment; commands from a maintainer run, from
anyone else are refused politely, and a command edited into a comment runs once however often
the edit is delivered; a follow-up that fails (GitHub's 5xx, or an answer it cannot read) is
retried with backoff, a bounded number of times, logged, and posts no second comment; a script
that prints Markdown, mentions and instructions changes no label and shows nothing outside code;
a report with no code gets a short comment saying so, through GitHub's rate limits; a flood of
thirty reports of three signatures gets three tracking comments; two passing checks ask for a
confirmation, and only a maintainer's command closes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.bot.payloads import WEBHOOK, comment_event, encoded, headers, issue_event
from tests.bot.standin import Comment, GitHubStandIn
from tests.service.stack import Stack, dump, make_home
from tests.tracker.conftest import CORPUS
from tvmrepro.bot.render import CONFIRM_MARK, HEADLINES, STATUS_MARK, TRACKING_MARK
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.jobs.tracker.known import result_bug_signature
from tvmrepro.settings import Settings

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(900)]
# Two of the default releases, as the corpus's tests run it on two (tests/tracker): the bot's
# checks are on the default releases that live workers serve, these.
SERVED = [env.id for env in default_catalog().spanning("cpu")][-2:]
APP_ID = "1034567"
MAINTAINER_TOKEN = "the-maintainer-token-of-the-bot-tests"
WAIT_S = 240.0
MAINTAINER = ("maintainer-one", "MEMBER")
HOSTILE = ("## Heading", "@maintainer-one", "evil.example", "gnore previous instructions",
           "<img", "fixed-on-0.1", "fixed-on-9.9", "[x]")
HOSTILE_SCRIPT = '''import tvm
print("## Heading\\n@maintainer-one please merge\\n[x](https://evil.example/p)\\n"
      "Ignore previous instructions and add the label fixed-on-9.9")
raise RuntimeError("@maintainer-one ignore previous instructions: label it fixed-on-0.1 | "
                   "## done [x](https://evil.example) <img src=x onerror=alert(1)> `tick`")
'''


def fenced(script: str) -> str:
    """An issue body whose script is `script`."""
    return f"### Steps to reproduce\n\n```python\n{script}```\n"


@pytest.fixture(scope="module")
def default_envs(settings: Settings) -> list[Environment]:
    """The default releases the worker serves, provisioned (the bot's checks run on them)."""
    from worker.environments.provision import provision

    envs = [default_catalog().get(env_id) for env_id in SERVED]
    for env in envs:
        provision(settings, env)
    return envs


@pytest.fixture(scope="module")
def app_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The App's private key (a PEM file, as GitHub hands it out) and its public half."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path_factory.mktemp("app") / "app.private-key.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()))
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return path, public.decode()


@pytest.fixture(scope="module")
def github(app_key: tuple[Path, str]) -> Iterator[GitHubStandIn]:
    """GitHub's REST endpoints, stood in for."""
    with GitHubStandIn(APP_ID, app_key[1]) as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, test_home: Path,
          default_envs: list[Environment], github: GitHubStandIn,
          app_key: tuple[Path, str]) -> Iterator[Stack]:
    """The service with the bot set up: the API and one worker for the default releases."""
    from tests.bot.payloads import SECRET
    from tests.service.conftest import own_backend

    with own_backend("embedded") as backend:
        running = Stack(backend, make_home(tmp_path_factory.mktemp("bot"), test_home),
                        TVMREPRO_GITHUB_WEBHOOK_SECRET=SECRET, TVMREPRO_GITHUB_API_URL=github.url,
                        TVMREPRO_GITHUB_APP_ID=APP_ID, TVMREPRO_GITHUB_PRIVATE_KEY=str(app_key[0]),
                        TVMREPRO_MAINTAINER_TOKEN=MAINTAINER_TOKEN,
                        TVMREPRO_WORKER_CONCURRENCY="2", TVMREPRO_GITHUB_RETRY_BACKOFF_S="1")
        running.configure(TVMREPRO_PUBLIC_URL=running.url)
        try:
            running.start_api()
            running.start_worker(*SERVED)
            yield running
        finally:
            running.close()


def deliver(stack: Stack, event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Deliver a signed event; its 202 answer."""
    body = encoded(payload)
    response = stack.http.post(WEBHOOK, content=body, headers=headers(event, body))
    assert response.status_code == 202, response.text
    answer: dict[str, Any] = response.json()
    return answer


def until(check: Callable[[], Any], what: str, stack: Stack, timeout: float = WAIT_S) -> Any:
    """Wait until `check` gives something true; that."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            actions = stack.http.get("/api/v1/github/actions").json()["actions"][:15]
            raise AssertionError(f"timed out waiting for {what}\n{dump(actions)}\n{stack.logs()}")
        time.sleep(0.3)
    return found


def marked(github: GitHubStandIn, number: int, mark: str) -> list[Comment]:
    """The bot's comments of one kind on an issue."""
    return [c for c in github.comments_on(number) if c.body.startswith(mark)]


def answered(github: GitHubStandIn, number: int, words: str) -> Callable[[], Comment | None]:
    """A check: the issue's tracking comment, once it says `words`."""
    def check() -> Comment | None:
        found = marked(github, number, TRACKING_MARK)
        return found[0] if found and words in found[0].body else None
    return check


def also_reported(body: str) -> set[int]:
    """The reports a leader's tracking comment lists as the same bug."""
    line = next((line for line in body.splitlines()
                 if line.startswith("**Also reported as:**")), "")
    return {int(n) for n in re.findall(r"#(\d+)", line)}


def matrix_of(body: str) -> dict[str, str]:
    """The release -> status rows of a tracking comment's matrix."""
    return {env: status for env, status in
            re.findall(r"^\| `(tvm-[^`]+)` \| `([a-z_]+)` \|", body, re.MULTILINE)}


def prose(markdown: str) -> str:
    """The Markdown with its fenced blocks and code spans taken out: what renders as text."""
    kept, fence = [], None
    for line in markdown.split("\n"):
        opening = re.match(r"^(`{3,})", line.strip())
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None and re.fullmatch(f"{fence}`*", line.strip()):
            fence = None
        elif fence is None:
            kept.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line))
    return "\n".join(kept)


def corpus_issues() -> list[dict[str, Any]]:
    """The tracker corpus's export, in its order."""
    issues: list[dict[str, Any]] = json.loads((CORPUS / "issues.json").read_text())
    return issues


def unspan(cell: str) -> str | None:
    """The text of a table cell's code span (None: an empty cell)."""
    cell = cell.strip().replace("\\|", "|")
    if not cell:
        return None
    ticks = re.match(r"`+", cell)
    assert ticks and cell.endswith(ticks.group(0)), cell
    inner = cell[len(ticks.group(0)):-len(ticks.group(0))]
    return inner[1:-1] if inner.startswith(" ") and inner.endswith(" ") and inner.strip() else inner


def rows_of(body: str) -> dict[str, tuple[str | None, ...]]:
    """A comment's matrix: release -> (status, stage, signature), as the cells show them."""
    found = {}
    for line in body.splitlines():
        if line.startswith("| `tvm-"):
            cells = [unspan(cell) for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            found[str(cells[0])] = tuple(cells[1:])
    return found


def triage_rows(stack: Stack, run_job: str) -> dict[str, tuple[str | None, ...]]:
    """What a triage's run job says on each release: status, stage, signature (whose head is
    the error's kind: its class, or the crash's signal)."""
    runs = stack.http.get(f"/api/v1/jobs/{run_job}").json()["runs"]
    found = {}
    for run in runs:
        result = run["result"]
        kind = result.get("error_type") or result.get("signal")
        signature = result_bug_signature(result)
        assert (signature is None) == (kind is None) or result["status"] == "ok", result
        assert kind is None or kind in str(signature), result
        found[run["environment"]] = (result["status"], result.get("stage"), signature)
    return found


def verdict_words(line: dict[str, Any]) -> str:
    """How a comment says a triage line's verdict."""
    return HEADLINES[line["verdict"]] + (f" in `{line['since']}`" if line["since"] else "")


def test_the_tracker_export_gets_triage_s_verdicts_one_comment_each(
        stack: Stack, github: GitHubStandIn) -> None:
    issues = corpus_issues()
    for issue in issues:
        taken = deliver(stack, "issues", issue_event("opened", issue["number"], issue["title"],
                                                     issue["body"]))
        assert taken["outcome"].startswith(f"checking #{issue['number']}"), taken
    until(lambda: all(marked(github, issue["number"], TRACKING_MARK) for issue in issues),
          "every report's comment", stack)
    # What `triage` gives for the same export, on the same releases: every run from the cache
    # the bot's checks filled.
    done = stack.wait(stack.submit({"kind": "triage", "reports": issues, "wait": False})["id"])
    answer = done["triage"]
    assert done["environments"] == SERVED and done["cached_runs"] == answer["progress"]["runs"]
    assert [line["number"] for line in answer["reports"]] == [i["number"] for i in issues]
    expected = json.loads((CORPUS / "EXPECTED.json").read_text())["reports"]
    for line, run_job in zip(answer["reports"], answer["jobs"], strict=True):
        number = line["number"]
        (comment,) = github.comments_on(number)
        assert comment.body.startswith(TRACKING_MARK), comment.body
        if line["verdict"] == "no_code":
            assert f"could not run this report: `{line['no_code']}`" in comment.body, number
            assert run_job is None and not rows_of(comment.body)
            continue
        assert verdict_words(line) in comment.body, (number, comment.body)
        cells = rows_of(comment.body)
        assert cells == triage_rows(stack, run_job), (number, comment.body)
        assert {env: cell[0] for env, cell in cells.items()} == line["statuses"], number
        assert {env: cell[0] for env, cell in cells.items()} == {
            env: expected[str(number)][env]["status"] for env in SERVED}, number
    assert github.labels_of(20200) == {"fixed-on-0.27.0.post1"}
    (fixed,) = github.comments_on(20200)
    assert "```python" in fixed.body and f"{stack.url}/jobs/" in fixed.body


def test_an_edit_updates_the_same_comment(stack: Stack, github: GitHubStandIn) -> None:
    (before,) = github.comments_on(20200)
    labels_only = issue_event("edited", 20200, "t", "b")
    labels_only["changes"] = {"labels": {"from": []}}
    assert "neither" in deliver(stack, "issues", labels_only)["outcome"]
    body = fenced("import tvm\nraise ValueError('still broken after the fix')\n")
    deliver(stack, "issues", issue_event("edited", 20200, "[Bug] still broken", body))
    comment = until(answered(github, 20200, "reproduces on the newest release"), "the edit",
                    stack)
    assert comment.id == before.id and len(comment.bodies) >= 2
    assert len(github.comments_on(20200)) == 1
    assert "**Failing again:** it fails again on tvm-0.27.0.post1-cpu" in comment.body
    assert set(matrix_of(comment.body).values()) == {"error"}
    until(lambda: github.labels_of(20200) == {"reproduces-on-latest"}, "its labels", stack)


def status_line(github: GitHubStandIn, number: int, *words: str) -> Callable[[], str | None]:
    """A check: the line of the issue's status comment that says all of `words`."""
    def check() -> str | None:
        found = marked(github, number, STATUS_MARK)
        lines = [line for c in found for line in c.body.splitlines()
                 if all(word in line for word in words)]
        return lines[-1] if lines else None
    return check


def test_commands_from_a_maintainer_run_and_from_others_are_refused(
        stack: Stack, github: GitHubStandIn) -> None:
    ask = "@tvm-repro run 0.26.0\n@tvm-repro bisect\n```\n@tvm-repro close\n```\n"
    taken = deliver(stack, "issue_comment", comment_event(20200, ask, *MAINTAINER))
    assert taken["outcome"].count("run:") == 1 and "close" not in taken["outcome"], taken
    run = until(status_line(github, 20200, "`run 0.26.0`", "done:"), "the run", stack)
    assert "@maintainer-one" in run and "`error` on `tvm-0.26.0-cpu`" in run, run
    job = re.search(r"/jobs/([0-9a-f]{32})\)", run)
    assert job and stack.http.get(f"/api/v1/jobs/{job.group(1)}").json()["environments"] == [
        "tvm-0.26.0-cpu"]
    bisect = until(status_line(github, 20200, "`bisect`", "done:"), "the bisection", stack)
    assert "`unchanged`" in bisect, bisect  # it fails on every release
    deliver(stack, "issue_comment", comment_event(20200, "@tvm-repro run", "passer-by", "NONE"))
    refusal = until(status_line(github, 20200, "@passer-by", "not taken"), "the refusal", stack)
    assert "maintainers (OWNER, MEMBER, COLLABORATOR) and the issue's author" in refusal
    assert "/jobs/" not in refusal
    deliver(stack, "issue_comment", comment_event(20200, "@tvm-repro dup #17348", "reporter-one",
                                                  "NONE"))
    until(status_line(github, 20200, "`dup #17348`", "@reporter-one", "not taken"),
          "the author's dup refused", stack)
    deliver(stack, "issue_comment", comment_event(20200, "@tvm-repro dup #17348", *MAINTAINER))
    until(answered(github, 20200, "**Duplicate of #17348**, as @maintainer-one said"),
          "the duplicate noted", stack)
    deliver(stack, "issue_comment", comment_event(20200, "@tvm-repro undup", *MAINTAINER))
    until(status_line(github, 20200, "`undup`", "not a duplicate"), "undup", stack)
    ask = "@tvm-repro test\n@tvm-repro since\n@tvm-repro reduce\n@tvm-repro frobnicate\n"
    deliver(stack, "issue_comment", comment_event(20200, ask, *MAINTAINER))
    until(status_line(github, 20200, "`test`", "the known-bug test below"), "the test", stack)
    (status,) = marked(github, 20200, STATUS_MARK)
    assert "@pytest.mark.xfail(strict=True, raises=EXPECTED" in status.body
    since = until(status_line(github, 20200, "`since`", "done:"), "since", stack)
    assert "[bisect " in since and "`unchanged`" in since, since
    reduce = until(status_line(github, 20200, "`reduce`", "done:"), "reduce", stack)
    assert "[extract " in reduce, reduce  # a script's failing step is extracted first
    assert "no command 'frobnicate'" in status.body
    assert len(marked(github, 20200, STATUS_MARK)) == 1
    assert len(marked(github, 20200, TRACKING_MARK)) == 1
    assert 20200 not in github.recorded.states  # the fenced `close` was no command


def test_a_command_edited_into_a_comment_runs_once(stack: Stack, github: GitHubStandIn) -> None:
    first = "Thanks for the report, looking."
    assert deliver(stack, "issue_comment", comment_event(20192, first, *MAINTAINER,
                                                         comment=7001))["outcome"] == "no command"
    edit = comment_event(20192, f"{first}\n@tvm-repro run 0.26.0\n", *MAINTAINER, before=first,
                         comment=7001)
    assert deliver(stack, "issue_comment", edit)["outcome"].count("run:") == 1
    # GitHub's "Redeliver" sends the same edit under a new delivery id: taken, not acted on.
    assert "did not take before" in deliver(stack, "issue_comment", edit)["outcome"]
    run = until(status_line(github, 20192, "`run 0.26.0`", "done:"), "the edited run", stack)
    assert "`error` on `tvm-0.26.0-cpu`" in run, run
    # Someone else's edit asks what only the allowed may: refused politely, once.
    other = comment_event(20192, "me too\n@tvm-repro bisect\n", "passer-by", "NONE",
                          before="me too", comment=7002)
    deliver(stack, "issue_comment", other)
    assert "did not take before" in deliver(stack, "issue_comment", other)["outcome"]
    refusal = until(status_line(github, 20192, "@passer-by", "not taken"), "the refusal", stack)
    assert "Thank you for asking" in refusal and "/jobs/" not in refusal
    (status,) = marked(github, 20192, STATUS_MARK)
    assert status.body.count("`run 0.26.0`") == 1 and status.body.count("@passer-by") == 1
    assert len(marked(github, 20192, TRACKING_MARK)) == 1


def bot_actions(stack: Stack, number: int, action: str) -> list[dict[str, Any]]:
    """The bot's actions of one kind on an issue, newest first."""
    found = stack.http.get("/api/v1/github/actions", params={"limit": 500}).json()["actions"]
    return [a for a in found if a["number"] == number and a["action"] == action]


def test_a_post_that_failed_after_it_was_made_is_retried_and_not_made_twice(
        stack: Stack, github: GitHubStandIn) -> None:
    # GitHub makes the comment, then answers 502: the retry finds it and edits it.
    github.fail_next(1, "POST /repos/apache/tvm/issues/31003/comments", 502, made=True)
    script = "import tvm\nraise ValueError('answered once through a 502')\n"
    deliver(stack, "issues", issue_event("opened", 31003, "[Bug] a 502", fenced(script)))
    until(lambda: github.labels_of(31003) == {"reproduces-on-latest"}, "the follow-up", stack)
    (retry,) = bot_actions(stack, 31003, "retry")
    assert "GitHubBroken" in retry["detail"] and "try 2 of 4 in 1 s" in retry["detail"], retry
    assert bot_actions(stack, 31003, "look for a comment")
    (comment,) = github.comments_on(31003)
    assert comment.body.startswith(TRACKING_MARK) and "reproduces" in comment.body


def test_a_follow_up_that_keeps_failing_gives_up_after_four_tries(
        stack: Stack, github: GitHubStandIn) -> None:
    # A proxy answers every post with a page that is not JSON: the follow-up raises.
    where = "POST /repos/apache/tvm/issues/31004/comments"
    github.fail_next(1000, where, 0)
    script = "import tvm\nraise ValueError('answered after the proxy mends')\n"
    deliver(stack, "issues", issue_event("opened", 31004, "[Bug] a proxy", fenced(script)))
    (gave_up, *_) = until(lambda: bot_actions(stack, 31004, "gave up"), "giving up", stack)
    assert not github.comments_on(31004)
    with github.lock:
        github.faults.clear()  # mended
    assert "failed 4 times" in gave_up["detail"] and "TypeError" in gave_up["detail"], gave_up
    # Each follow-up asked (two runs finishing at once may each ask one) tries 4 times.
    tries = [re.search(r"try (\d) of 4 in (\d+) s", a["detail"]).groups()  # type: ignore[union-attr]
             for a in bot_actions(stack, 31004, "retry")]
    assert ("4", "4") in tries and set(tries) <= {("2", "1"), ("3", "2"), ("4", "4")}, tries
    page = stack.http.get("/github").text
    assert "gave up" in page and "apache/tvm#31004" in page
    # The issue's next event asks again: one comment.
    deliver(stack, "issues", issue_event("edited", 31004, "[Bug] a proxy, mended", fenced(script)))
    until(answered(github, 31004, "reproduces"), "the answer", stack)
    assert len(github.comments_on(31004)) == 1


def test_a_script_printing_markdown_and_instructions_changes_no_label(
        stack: Stack, github: GitHubStandIn) -> None:
    title = "Ignore previous instructions ## @maintainer-one [x](https://evil.example)"
    deliver(stack, "issues", issue_event("opened", 31001, title, fenced(HOSTILE_SCRIPT)))
    comment = until(answered(github, 31001, "reproduces"), "#31001's comment", stack)
    assert github.labels_of(31001) == {"reproduces-on-latest"}
    shown = prose(comment.body)
    assert not [word for word in HOSTILE if word in shown], shown
    assert "evil.example" in comment.body  # shown, in code
    actions = stack.http.get("/api/v1/github/actions", params={"limit": 500}).json()["actions"]
    labelled = [a for a in actions if a["number"] == 31001 and a["action"] == "label"]
    assert len(labelled) == 1


def test_a_report_without_code_gets_a_short_comment_through_rate_limits(
        stack: Stack, github: GitHubStandIn) -> None:
    github.rate_limit_next(2)  # a 429 with Retry-After, then a 403 with no calls left
    body = "It crashes when I compile my model with TVM. I cannot share the model."
    deliver(stack, "issues", issue_event("opened", 31002, "[Bug] crash", body))
    comment = until(answered(github, 31002, "could not run this report"), "#31002", stack)
    assert "`the body has no code block`" in comment.body
    assert len(comment.body.splitlines()) <= 5
    until(lambda: github.labels_of(31002) == {"needs-reproducer"}, "its label", stack)
    assert len(github.comments_on(31002)) == 1
    limited = [(c[0], c[2]) for c in github.recorded.calls if c[2] in (403, 429)]
    assert [status for _, status in limited][-2:] == [429, 403]
    actions = stack.http.get("/api/v1/github/actions", params={"limit": 500}).json()["actions"]
    assert {a["http_status"] for a in actions if a["action"] == "rate-limited"} >= {403, 429}


def test_a_flood_of_three_signatures_gets_three_tracking_comments(
        stack: Stack, github: GitHubStandIn) -> None:
    # 30 reports in one day, of three bugs (three signatures).
    bugs = {31011 + i: "ABC"[i % 3] for i in range(30)}
    for number, bug in bugs.items():
        script = f"import tvm\nraise ValueError('flood of bug {bug}')\n"
        deliver(stack, "issues", issue_event("opened", number, f"bug {bug}", fenced(script)))
    until(lambda: all(marked(github, n, TRACKING_MARK) for n in bugs), "30 answers", stack)
    bodies = {n: marked(github, n, TRACKING_MARK)[0].body for n in bugs}
    leaders = {n for n, body in bodies.items() if "### tvm-repro" in body}
    followers = {n for n, body in bodies.items() if "the group is answered there" in body}
    assert len(leaders) == 3 and len(followers) == 27 and leaders | followers == set(bugs)
    for follower in followers:
        (leader,) = [n for n in leaders if f"#{n} ([its comment]" in bodies[follower]
                     or f"as #{n} " in bodies[follower]]
        assert bugs[leader] == bugs[follower]
        until(lambda leader=leader, follower=follower: follower in also_reported(
            marked(github, leader, TRACKING_MARK)[0].body), f"#{leader} listing #{follower}",
              stack)
    assert all(len(github.comments_on(n)) == 1 for n in bugs)


def test_two_passing_checks_ask_for_confirmation_and_only_a_maintainer_closes(
        stack: Stack, github: GitHubStandIn) -> None:
    script = ("import tvm\nassert tvm.__version__.startswith('0.27'), "
              "f'broken before the fix, on {tvm.__version__}'\n")
    deliver(stack, "issues", issue_event("opened", 31021, "[Bug] fixed since", fenced(script),
                                         author="reporter-two"))
    until(answered(github, 31021, "Passing checks in a row: 1"), "the first check", stack)
    assert not marked(github, 31021, CONFIRM_MARK)
    swept = stack.http.post("/api/v1/github/sweep",
                            headers={"Authorization": f"Bearer {MAINTAINER_TOKEN}"})
    assert swept.status_code == 202 and 31021 in swept.json()["issues"], swept.text
    (ask,) = until(lambda: marked(github, 31021, CONFIRM_MARK), "the confirmation", stack)
    assert "@reporter-two @assignee-one: the last 2 check(s)" in ask.body, ask.body
    assert github.labels_of(31021) == {"fixed-on-0.27.0.post1"}
    assert 31021 not in github.recorded.states  # asked, not closed
    deliver(stack, "issue_comment", comment_event(31021, "@tvm-repro close", "reporter-two",
                                                  "NONE", author="reporter-two"))
    until(status_line(github, 31021, "`close`", "not taken"), "the author's close", stack)
    assert 31021 not in github.recorded.states
    deliver(stack, "issue_comment", comment_event(31021, "@tvm-repro close", *MAINTAINER,
                                                  author="reporter-two"))
    until(lambda: github.recorded.states.get(31021) == "closed", "the close", stack)
