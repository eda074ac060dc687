"""The GitHub bot through a real service: the API (gunicorn) and a Celery worker serving the
default releases (real TVM), the embedded store and broker, and GitHubStandIn for GitHub's REST
endpoints (an App's installation token asked with a real JWT). Deliveries are recorded payloads
(tests/cases/github), signed with real HMAC-SHA256.

An opened issue gets one comment whose matrix is what a triage of the same report gives (and
what plain TVM measured: tests/tracker/corpus); an edit edits that comment; commands from a
maintainer run, from anyone else are refused politely; a script that prints Markdown, mentions
and instructions changes no label and shows nothing outside code; a report with no code gets a
short comment saying so, through GitHub's rate limits; a flood of six reports of three
signatures gets three tracking comments; two passing checks ask for a confirmation, and only a
maintainer's command closes.
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
from tvmrepro.bot.render import CONFIRM_MARK, STATUS_MARK, TRACKING_MARK
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.settings import Settings

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(900)]
DEFAULT = [env.id for env in default_catalog().spanning("cpu")]
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
    """The default releases, provisioned (the bot's checks run on them)."""
    from worker.environments.provision import provision

    envs = default_catalog().spanning("cpu")
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
                        TVMREPRO_WORKER_CONCURRENCY="2")
        running.configure(TVMREPRO_PUBLIC_URL=running.url)
        try:
            running.start_api()
            running.start_worker(*DEFAULT)
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


def corpus_issue(number: int) -> dict[str, Any]:
    """One issue of the tracker corpus, as its export has it."""
    issues: list[dict[str, Any]] = json.loads((CORPUS / "issues.json").read_text())
    return next(issue for issue in issues if issue["number"] == number)


def test_an_opened_issue_gets_one_comment_with_the_triage_matrix(
        stack: Stack, github: GitHubStandIn) -> None:
    issue = corpus_issue(20200)  # fails on 0.25 and 0.26, fixed in 0.27 (plain TVM measured)
    taken = deliver(stack, "issues", issue_event("opened", 20200, issue["title"], issue["body"]))
    assert taken["outcome"].startswith("checking #20200"), taken
    comment = until(answered(github, 20200, "this report is fixed"), "#20200's comment", stack)
    # What a triage of the same report gives, on the same releases.
    triage = stack.submit({"kind": "triage", "reports": [issue], "wait": False})
    line = stack.wait(triage["id"])["triage"]["reports"][0]
    assert matrix_of(comment.body) == line["statuses"], comment.body
    assert list(matrix_of(comment.body)) == DEFAULT
    expected = json.loads((CORPUS / "EXPECTED.json").read_text())["reports"]["20200"]
    for env in set(DEFAULT) & set(expected):
        assert matrix_of(comment.body)[env] == expected[env]["status"], env
    assert "fixed in `tvm-0.27.0.post1-cpu`" in comment.body
    assert github.labels_of(20200) == {"fixed-on-0.27.0.post1"}
    assert len(github.comments_on(20200)) == 1
    assert "```python" in comment.body and f"{stack.url}/jobs/" in comment.body


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
    assert github.labels_of(20200) == {"reproduces-on-latest"}


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
