"""What the webhook makes of an event (the API's side, answered at once): an opened or edited
issue becomes a check (a triage of its one report on the default releases), a comment's
commands become jobs of the service or decisions kept in the issue's inbox, an installation is
logged. Nothing here calls GitHub: each issue touched is handed to its follow-up (a worker's
task), which a watched job's last run asks for too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tvmrepro.api.requests import JobRequest, parse_request
from tvmrepro.api.views import JobView
from tvmrepro.bot.commands import COMMANDS, Asked, asked_in, issue_number, refusal, releases
from tvmrepro.bot.state import BotState, Command, Inbox
from tvmrepro.environments import Catalog
from tvmrepro.errors import BadInput, NotServed
from tvmrepro.jobs.tracker.importing import ImportedReport, export_entry
from tvmrepro.results import FAILING
from tvmrepro.settings import MAX_ISSUE_NUMBER, Settings
from tvmrepro.store import QueueFull, Store

REFUSED_AT_ONCE = (BadInput, QueueFull, NotServed, ValueError)
MAX_TAKEN_COMMENTS = 100  # per issue: the comments whose commands the inbox remembers


@dataclass
class Desk:
    """What the webhook has at hand: the store, the catalog, how to start a job (as the
    deployment's own: no submitter's budget), whether a job is finished, and how to ask for
    an issue's follow-up."""

    settings: Settings
    store: Store
    catalog: Catalog
    start: Callable[[JobRequest], JobView]
    finished: Callable[[str], bool]
    follow: Callable[[str, int], None]


def tracked_repo(settings: Settings) -> str:
    """owner/name of the tracker (TVMREPRO_TRACKER_URL): the one repository the bot answers."""
    return urlsplit(settings.tracker_url).path.strip("/")


def field(data: Any, path: str, kind: type | tuple[type, ...] = str) -> Any:
    """`data`'s value at a dotted path ("issue.user.login"); BadInput names a missing or wrong
    one."""
    value = data
    for name in path.split("."):
        value = value.get(name) if isinstance(value, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise BadInput(f"payload.{path}", f"missing, or not a {getattr(kind, '__name__', kind)}")
    return value


def receive(desk: Desk, event: str, payload: Any) -> str:
    """Handle one delivery; what was done, in words."""
    if not isinstance(payload, dict):
        raise BadInput("payload", "must be a JSON object")
    action = payload.get("action")
    handler = HANDLERS.get(event)
    if handler is None:
        return f"{event}: not an event the bot answers"
    return handler(desk, payload, str(action))


def on_ping(desk: Desk, payload: dict[str, Any], action: str) -> str:
    """GitHub's first delivery to a new hook."""
    desk.store.log_action(None, None, "ping", f"hook {payload.get('hook_id')}: pong")
    return "pong"


def on_installation(desk: Desk, payload: dict[str, Any], action: str) -> str:
    """The App installed, removed or changed: logged."""
    account = field(payload, "installation.account.login")
    repos = [str(r.get("full_name")) for r in payload.get("repositories") or []
             if isinstance(r, dict)]
    detail = f"installation {action} by {account}" + (f": {', '.join(repos)}" if repos else "")
    desk.store.log_action(None, None, "installation", detail)
    return detail


def _repo(desk: Desk, payload: dict[str, Any]) -> str | None:
    repo = str(field(payload, "repository.full_name"))
    return repo if repo.lower() == tracked_repo(desk.settings).lower() else None


def issue_item(issue: dict[str, Any]) -> dict[str, Any]:
    """The issue as a triage takes it (`gh issue list --json` fields)."""
    number = field(issue, "number", int)
    if not 1 <= number <= MAX_ISSUE_NUMBER:
        raise BadInput("payload.issue.number", f"from 1 to {MAX_ISSUE_NUMBER}, got {number}")
    body = issue.get("body")
    return {"number": number, "title": str(issue.get("title") or ""),
            "state": str(issue.get("state") or "open").upper(),
            "body": body if isinstance(body, str) else "", "url": issue.get("html_url")}


def take_issue(desk: Desk, repo: str, payload: dict[str, Any], body: bool) -> Inbox:
    """The issue's inbox with what the payload says of it (its body too where `body`)."""
    issue = field(payload, "issue", dict)
    item = issue_item(issue)
    assignees = [str(a.get("login")) for a in issue.get("assignees") or [] if isinstance(a, dict)]
    installation = payload.get("installation") or {}

    def change(old: dict[str, Any] | None) -> dict[str, Any]:
        inbox = Inbox.model_validate(old) if old else Inbox(repo=repo, number=item["number"])
        update = {"title": item["title"], "author": field(issue, "user.login"),
                  "assignees": assignees, "url": item["url"],
                  "installation": installation.get("id") if isinstance(installation, dict)
                  else None} | ({"item": item} if body or inbox.item is None else {})
        return inbox.model_copy(update=update).model_dump(mode="json")

    return Inbox.model_validate(desk.store.update_bot_inbox(repo, item["number"], change))


def change_inbox(desk: Desk, inbox: Inbox, **update: Any) -> Inbox:
    """Change fields of an issue's inbox (its list of checks and commands appended to)."""
    def change(old: dict[str, Any] | None) -> dict[str, Any]:
        now = Inbox.model_validate(old) if old else inbox
        merged = {name: getattr(now, name) + value if name in ("checks", "commands") else value
                  for name, value in update.items()}
        return now.model_copy(update=merged).model_dump(mode="json")

    return Inbox.model_validate(desk.store.update_bot_inbox(inbox.repo, inbox.number, change))


def watch(desk: Desk, job_id: str, repo: str, numbers: list[int]) -> None:
    """The issues are answered from the job once it is done (at once where it is: a job
    served whole from the cache, or one done before the watch was stored)."""
    desk.store.watch_job(job_id, repo, numbers)
    if desk.finished(job_id):
        for number in numbers:
            desk.follow(repo, number)


def on_issue(desk: Desk, payload: dict[str, Any], action: str) -> str:
    """An issue opened, reopened or edited (its title or body): check its report; closed:
    left out of sweeps."""
    if action not in ("opened", "edited", "reopened", "closed"):
        return f"issues.{action}: nothing to do"
    repo = _repo(desk, payload)
    if repo is None:
        return "not the tracked repository"
    if action in ("closed", "reopened"):
        change_inbox(desk, take_issue(desk, repo, payload, body=False), closed=action == "closed")
        if action == "closed":
            return "closed: left out of sweeps"
    changes = payload.get("changes") or {}
    if action == "edited" and not ({"title", "body"} & set(changes)):
        return "issues.edited: neither its title nor its body changed"
    inbox = take_issue(desk, repo, payload, body=True)
    return check(desk, inbox)


def check(desk: Desk, inbox: Inbox, environments: list[str] | None = None) -> str:
    """Submit the report's triage on the default releases (a check of it)."""
    try:
        view = desk.start(parse_request({"kind": "triage", "reports": [inbox.item],
                                         "environments": environments}))
    except REFUSED_AT_ONCE as exc:
        change_inbox(desk, inbox, check_error=str(exc))
        desk.follow(inbox.repo, inbox.number)
        return f"could not check #{inbox.number}: {exc}"
    change_inbox(desk, inbox, checks=[view.id], report_job=view.id, check_error=None)
    watch(desk, view.id, inbox.repo, [inbox.number])
    return f"checking #{inbox.number}: job {view.id}"


def on_comment(desk: Desk, payload: dict[str, Any], action: str) -> str:
    """A comment created or edited: the commands it asks of the bot that were not taken from
    it before (an edit that adds one, not a redelivery of it), each answered in the status
    comment."""
    repo = _repo(desk, payload)
    if action not in ("created", "edited") or repo is None:
        return "issue_comment: nothing to do"
    if field(payload, "issue", dict).get("pull_request"):
        return "a pull request's comment"
    login = field(payload, "comment.user.login")
    bot = desk.settings.github_bot_name
    if payload["comment"]["user"].get("type") == "Bot" or login.lower() == f"{bot}[bot]".lower():
        return "the bot's own comment"
    asked = asked_in(str(payload["comment"].get("body") or ""), bot)
    if not asked:
        return "no command"
    inbox = take_issue(desk, repo, payload, body=False)
    before = asked_in(old_body(payload), bot) if action == "edited" else []
    inbox, fresh = claim(desk, inbox, str(field(payload, "comment.id", int)), asked, before)
    if not fresh:
        return "no command it did not take before"
    association = str(payload["comment"].get("author_association") or "NONE")
    done = [ask(desk, inbox, one, login, association) for one in fresh]
    desk.follow(repo, inbox.number)
    return "; ".join(done)


def old_body(payload: dict[str, Any]) -> str:
    """An edited comment's body before the edit (`changes.body.from`; empty where not told)."""
    changes = payload.get("changes")
    body = changes.get("body") if isinstance(changes, dict) else None
    before = body.get("from") if isinstance(body, dict) else None
    return before if isinstance(before, str) else ""


def command_key(asked: Asked) -> str:
    """A command as the inbox remembers it was taken from a comment."""
    return " ".join([asked.name, *asked.args])


def claim(desk: Desk, inbox: Inbox, comment: str, asked: list[Asked],
          before: list[Asked]) -> tuple[Inbox, list[Asked]]:
    """The commands of a comment not taken from it before, marked taken in the same
    transaction (two deliveries of one edit take each command once). A comment the bot has no
    record of takes its edit's old body as taken (its commands were answered when it was
    made)."""
    fresh: list[Asked] = []

    def change(old: dict[str, Any] | None) -> dict[str, Any]:
        now = Inbox.model_validate(old) if old else inbox
        seen = list(now.taken.get(comment, [command_key(one) for one in before]))
        fresh.clear()
        for one in asked:
            if command_key(one) in seen:
                seen.remove(command_key(one))
            else:
                fresh.append(one)
        kept = [*now.taken.get(comment, [command_key(one) for one in before]),
                *[command_key(one) for one in fresh]]
        taken = {key: value for key, value in now.taken.items() if key != comment}
        taken = dict(list(taken.items())[-(MAX_TAKEN_COMMENTS - 1):]) | {comment: kept}
        return now.model_copy(update={"taken": taken}).model_dump(mode="json")

    found = Inbox.model_validate(desk.store.update_bot_inbox(inbox.repo, inbox.number, change))
    return found, fresh


def ask(desk: Desk, inbox: Inbox, asked: Asked, login: str, association: str) -> str:
    """One command: refused, answered at once, or a job of the service (watched)."""
    command = Command(name=asked.name, args=list(asked.args), by=login)
    refused = refusal(asked.name, association, login, inbox.author, desk.settings)
    update: dict[str, Any] = {}
    if refused:
        command = command.model_copy(update={"refused": refused})
    elif asked.name not in COMMANDS:
        command = command.model_copy(update={
            "error": f"no command {asked.name[:40]!r}; commands: {', '.join(COMMANDS)}"})
    else:
        try:
            command, update = STARTERS[asked.name](desk, inbox, command)
        except REFUSED_AT_ONCE as exc:
            command = command.model_copy(update={"error": str(exc)})
    inbox = change_inbox(desk, inbox, commands=[command], **update)
    if command.job:
        watch(desk, command.job, inbox.repo, [inbox.number])
    return f"{command.name}: {command.refused or command.error or command.note or command.job}"


Started = tuple[Command, dict[str, Any]]


def report_of(inbox: Inbox) -> ImportedReport:
    """The issue's report, imported from its body as the webhook last saw it."""
    if inbox.item is None:
        raise ValueError("the bot has not seen this issue's body: edit the issue first")
    return export_entry(inbox.item, 0, "issue")


def started(desk: Desk, command: Command, body: dict[str, Any]) -> Command:
    """The command with the job `body` asks for."""
    view = desk.start(parse_request(body))
    return command.model_copy(update={"job": view.id, "job_kind": view.kind})


def start_run(desk: Desk, inbox: Inbox, command: Command) -> Started:
    """`run [releases]`: a triage of the report (on the default releases: a check)."""
    envs = releases(tuple(command.args), desk.catalog) or None
    report_of(inbox)  # a body it cannot read is refused before any job
    command = started(desk, command, {"kind": "triage", "reports": [inbox.item],
                                      "environments": envs})
    return command, ({"checks": [command.job], "report_job": command.job} if envs is None
                     else {})


def start_bisect(desk: Desk, inbox: Inbox, command: Command) -> Started:
    """`bisect [releases]`: a bisection of the report over the releases (default: every one
    served), the failure oracle."""
    envs = releases(tuple(command.args), desk.catalog) or None
    case = report_of(inbox).case().model_dump(mode="json", exclude_defaults=True)
    return started(desk, command, {"kind": "bisect", "case": case, "environments": envs}), {}


def start_since(desk: Desk, inbox: Inbox, command: Command) -> Started:
    """`since`: since when this very bug (its signature) is there, over every served release."""
    case = report_of(inbox).case().model_dump(mode="json", exclude_defaults=True)
    return started(desk, command, {"kind": "bisect", "case": case, "oracle": "signature"}), {}


def newest_failing(desk: Desk, inbox: Inbox) -> str:
    """The newest release where the latest check failed; ValueError where none did."""
    found = desk.store.bot_issue(inbox.repo, inbox.number)
    latest = BotState.model_validate(found[1] if found else {}).latest
    failing = [row.env for row in (latest.rows if latest else []) if row.status in FAILING]
    if not failing:
        raise ValueError("no release of the latest check fails: nothing to reduce")
    return failing[-1]


def start_reduce(desk: Desk, inbox: Inbox, command: Command) -> Started:
    """`reduce`: a module-mode report is reduced on its newest failing release; a script's
    failing step is extracted there first (an extract job: its page reduces it further)."""
    report, env = report_of(inbox), newest_failing(desk, inbox)
    if report.module_case is not None:
        body = {"kind": "reduce", "case": report.module_case, "environments": [env]}
    else:
        body = {"kind": "extract", "case": report.case().model_dump(
            mode="json", exclude_defaults=True), "environments": [env]}
    return started(desk, command, body), {}


def start_test(desk: Desk, inbox: Inbox, command: Command) -> Started:
    """`test`: the known-bug test of the latest check's run job (`tvmrepro export-test`)."""
    found = desk.store.bot_issue(inbox.repo, inbox.number)
    latest = BotState.model_validate(found[1] if found else {}).latest
    if latest is None or latest.run_job is None:
        raise ValueError("the report has not run yet")
    return command.model_copy(update={"job": latest.run_job, "job_kind": "test"}), {}


def start_dup(desk: Desk, inbox: Inbox, command: Command) -> Started:
    """`dup #N`: a maintainer says it duplicates #N."""
    number = issue_number(tuple(command.args), inbox.number)
    return command.model_copy(update={"note": f"noted: a duplicate of #{number}"}), {
        "duplicate_of": number, "duplicate_by": command.by, "not_duplicate": False}


def start_undup(desk: Desk, inbox: Inbox, command: Command) -> Started:
    """`undup`: a maintainer says it duplicates nothing (no likely-duplicate label again)."""
    return command.model_copy(update={"note": "noted: not a duplicate"}), {
        "duplicate_of": None, "duplicate_by": None, "not_duplicate": True}


def start_close(desk: Desk, inbox: Inbox, command: Command) -> Started:
    """`close`: a maintainer closes the issue (nothing else makes the bot close one)."""
    return command.model_copy(update={"note": "closing the issue"}), {"close_by": command.by}


STARTERS: dict[str, Callable[[Desk, Inbox, Command], Started]] = {
    "run": start_run, "bisect": start_bisect, "since": start_since, "reduce": start_reduce,
    "test": start_test, "dup": start_dup, "undup": start_undup, "close": start_close}
HANDLERS: dict[str, Callable[[Desk, dict[str, Any], str], str]] = {
    "ping": on_ping, "installation": on_installation, "issues": on_issue,
    "issue_comment": on_comment}


def sweep(desk: Desk, repo: str) -> tuple[str | None, list[int]]:
    """A check of every open issue the bot took (one triage of them all, at most the triage
    cap); its job and the issues."""
    items = [(number, Inbox.model_validate(inbox)) for number, inbox, state
             in desk.store.bot_issues(repo)
             if inbox.get("item") and not inbox.get("closed") and not (state or {}).get("closed")]
    items = items[:desk.settings.max_triage_reports]
    if not items:
        return None, []
    view = desk.start(parse_request({"kind": "triage",
                                     "reports": [inbox.item for _, inbox in items]}))
    for _, inbox in items:
        change_inbox(desk, inbox, checks=[view.id])
    watch(desk, view.id, repo, [number for number, _ in items])
    return view.id, [number for number, _ in items]
