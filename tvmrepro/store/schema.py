"""The job store's tables (SQLAlchemy Core): the same schema on SQLite and PostgreSQL.

    jobs          one submission: the case, the environments and variants asked for
    runs          one (variant, environment) of a job; `state` queued -> running -> done;
                  `result_id` names the run whose result it shows (itself, or the
                  run it was served from by the cache)
    results       one per run that really ran: status, stage, signature, the rest as JSON
    logs          that run's stdout and stderr
    pass_ir       that run's TVMScript after each pass, one row per pass
    admission     one row; every submission locks it, so the queue cap holds under
                  concurrent submissions on either database
    workers       live workers, the environments they serve and those whose images they
                  are building (heartbeats)
    fingerprints  what each served environment's TVM has (version, pass names)
    bisections    a bisect job's options and its bisect object (docs/contract.md, "Bisection")
    comparisons   a job's IR comparisons (the matrix's), computed when its last run is stored
    narrowings    a reduce or extract job's options, progress and answer (docs/contract.md, "Reduction")
    known_issues  the signature of each triaged issue's bug (a job failing with it names the
                  issue a likely duplicate)
    triage_reports  a triage job's reports in order, each with the run job of its script (a
                  sweep job's stored cases, each with its run job, too)
    blobs         the content of each file a case carries, once by its SHA-256 (a stored
                  case names its files by digest)
    github_*      the GitHub bot's (docs/bot.md): webhook deliveries seen (replays refused),
                  its state per issue, the jobs it watches, the groups of a flood, its actions

A value of 256 KiB or more (pass IR, a log, a file, a result's data, comparisons) lives in the
artifact store, its row naming it in a `*_ref` column.

Every change here is also a revision in tvmrepro/store/migrations/versions/ (a test compares them).

Times are seconds since the epoch (float), the same on both databases.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

ID = sa.String(32)  # uuid4().hex
# The SHA-256 (hex) of a value kept in the artifact store (tvmrepro.store.artifacts) instead of
# its row, which then holds an empty value: no row holds a value of ARTIFACT_MIN_BYTES or more.
ARTIFACT_REF = sa.String(64)

jobs = sa.Table(
    "jobs", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("title", sa.Text, nullable=False, default=""),
    sa.Column("case", sa.JSON, nullable=False),
    sa.Column("environments", sa.JSON, nullable=False),
    sa.Column("variants", sa.JSON, nullable=False),
    sa.Column("bypass_cache", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.Float, nullable=False),
    # SHA-256 (hex) of the token that DELETE must bring; null: no token cancels the job.
    sa.Column("cancel_digest", sa.String(64), nullable=True),
    # Who submitted it (tvmrepro.submitters: "maintainer", or the client's address); a part of
    # a triage or sweep has its parent's. Null: stored before submitters were kept.
    sa.Column("submitter", sa.String(64), nullable=True),
    # What its submission added to the store, in bytes (a submitter's budget counts them);
    # null as submitter.
    sa.Column("stored_bytes", sa.BigInteger, nullable=True),
    # Why those environments (tvmrepro.choice); null: stored before it was kept.
    sa.Column("environments_why", sa.Text, nullable=True),
    # Moves on in every transaction that changes the job's view (its runs' states and results,
    # its comparisons, its bisection's or narrowing's rows): the API's long-polls watch it
    # (service/waiting.py) instead of reading the job again.
    sa.Column("revision", sa.Integer, nullable=False, server_default="0"),
    sa.Index("jobs_submitter_created", "submitter", "created_at"),
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("job_id", ID, sa.ForeignKey("jobs.id"), nullable=False, index=True),
    sa.Column("ordinal", sa.Integer, nullable=False),
    sa.Column("variant", sa.String(64), nullable=False),
    sa.Column("environment", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("cache_key", sa.String(64), nullable=False, index=True),
    sa.Column("cached", sa.Boolean, nullable=False, default=False),
    sa.Column("result_id", ID, nullable=True),
    sa.Column("timeout_s", sa.Integer, nullable=False),
    sa.Column("deliveries", sa.Integer, nullable=False, default=0),
    sa.Column("claimed_by", sa.String(128), nullable=True),
    sa.Column("claimed_at", sa.Float, nullable=True),
    sa.Column("published_at", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float, nullable=True),
    sa.Index("runs_state_environment", "state", "environment"),
    # What finished within a recent window (GET /metrics' durations and waits), without a scan.
    sa.Index("runs_finished_at", "finished_at"),
)

results = sa.Table(
    "results", metadata,
    sa.Column("run_id", ID, sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("stage", sa.String(128), nullable=True),
    sa.Column("signature", sa.Text, nullable=True),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("data_ref", ARTIFACT_REF, nullable=True),
    # GET /metrics counts results by status from this index, not from their rows.
    sa.Index("results_status", "status"),
)

logs = sa.Table(
    "logs", metadata,
    sa.Column("run_id", ID, sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("stdout", sa.Text, nullable=False),
    sa.Column("stderr", sa.Text, nullable=False),
    sa.Column("truncated", sa.Boolean, nullable=False),
    sa.Column("stdout_ref", ARTIFACT_REF, nullable=True),
    sa.Column("stderr_ref", ARTIFACT_REF, nullable=True),
)

pass_ir = sa.Table(
    "pass_ir", metadata,
    sa.Column("run_id", ID, sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("seconds", sa.Float, nullable=False),
    sa.Column("functions", sa.JSON, nullable=False),
    sa.Column("ir", sa.Text, nullable=False),
    sa.Column("ir_ref", ARTIFACT_REF, nullable=True),
)

admission = sa.Table(
    "admission", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tickets", sa.Integer, nullable=False),
)

workers = sa.Table(
    "workers", metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("environments", sa.JSON, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
    # Environment id -> the current step of its image's build (the worker serves it once built).
    sa.Column("building", sa.JSON, nullable=True),
    # How many runs it takes at once (null: a worker of an earlier version, one slot).
    sa.Column("concurrency", sa.Integer, nullable=True),
)

fingerprints = sa.Table(
    "fingerprints", metadata,
    sa.Column("environment", sa.String(64), primary_key=True),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# One row per bisect job: what was asked (options) and the bisect object, computed when a
# probe finishes (`seen`: how many of the job's runs were done then) rather than on reads.
bisections = sa.Table(
    "bisections", metadata,
    sa.Column("job_id", ID, primary_key=True),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("result", sa.JSON, nullable=True),
    sa.Column("seen", sa.Integer, nullable=False, default=0),
    sa.Column("updated_at", sa.Float, nullable=False),
    # The transitions' commit windows and suspects that the submitter's command line computed
    # from a history of its own (`bisect --history`), read over the step's own.
    sa.Column("windows", sa.JSON, nullable=True),
)

# The matrix's comparisons of a job, made once its runs are all done (`runs`: how many runs
# they were computed from; a job that gains runs later gets them again).
comparisons = sa.Table(
    "comparisons", metadata,
    sa.Column("job_id", ID, sa.ForeignKey("jobs.id"), primary_key=True),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("data_ref", ARTIFACT_REF, nullable=True),
)

# One row per reduce or extract job: what was asked (options), how far it got (progress, the
# best case so far), and its answer (result) or why it has none (error); its one run's worker
# writes it as it goes.
narrowings = sa.Table(
    "narrowings", metadata,
    sa.Column("job_id", ID, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("progress", sa.JSON, nullable=True),
    sa.Column("result", sa.JSON, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# One row per issue that a triage saw fail: its bug's signature (as triage groups reports) and
# where the issue is. A triage again replaces the row. Small (an issue tracker's bugs): read
# whole by signature, no index.
known_issues = sa.Table(
    "known_issues", metadata,
    sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("url", sa.Text, nullable=True),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("state", sa.String(16), nullable=True),
    sa.Column("signature", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.Float, nullable=False),
)

# One row per report of a triage job, in order: the report as imported (its script, state and
# quoted error) and the run job its script became (null: no code). The runs are that job's, so
# a triage's runs are queued, cached, recovered and stored as every run is. A sweep job (a
# triage of the store's cases on a new release) keeps its stored cases here the same way.
triage_reports = sa.Table(
    "triage_reports", metadata,
    sa.Column("job_id", ID, sa.ForeignKey("jobs.id"), primary_key=True),
    sa.Column("ordinal", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("report", sa.JSON, nullable=False),
    sa.Column("run_job", ID, nullable=True, index=True),
)

# One row per distinct file content that a case carried (tvmrepro.attachments), by its SHA-256:
# two jobs that attach the same file share it. Written at submission, read by the worker before
# a run; never interpreted (a pickle is loaded only inside the sandbox).
blobs = sa.Table(
    "blobs", metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("content", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("content_ref", ARTIFACT_REF, nullable=True),
)


# The GitHub bot (tvmrepro/bot/). One row per webhook delivery taken: a second with the same id
# is a replay, refused.
github_deliveries = sa.Table(
    "github_deliveries", metadata,
    sa.Column("delivery_id", sa.String(64), primary_key=True),
    sa.Column("event", sa.String(64), nullable=False),
    sa.Column("action", sa.String(64), nullable=True),
    sa.Column("received_at", sa.Float, nullable=False),
)

# One row per issue the bot answers: its inbox (what the webhook took: the issue, its checks'
# jobs, the commands asked; written by the API only), its state (what the follow-up did: the
# checks counted, the comments it owns, the labels it set; written by the follow-up only) and a
# lease, so that one follow-up at a time writes to the issue (two would each post "the" comment).
github_issues = sa.Table(
    "github_issues", metadata,
    sa.Column("repo", sa.String(140), primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("inbox", sa.JSON, nullable=False),
    sa.Column("state", sa.JSON, nullable=False),
    sa.Column("lease", sa.String(32), nullable=True),
    sa.Column("lease_until", sa.Float, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# The jobs the bot watches, each with the issues it answers (a sweep's triage answers many):
# a worker that stores a watched job's last run asks for the issues' follow-up.
github_jobs = sa.Table(
    "github_jobs", metadata,
    sa.Column("job_id", ID, primary_key=True),
    sa.Column("repo", sa.String(140), primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

# The first issue of a signature within the flood window: reports failing with it are answered
# there (a primary key, so two reports finishing at once cannot both lead).
github_floods = sa.Table(
    "github_floods", metadata,
    sa.Column("repo", sa.String(140), primary_key=True),
    sa.Column("signature", sa.String(64), primary_key=True),  # its SHA-256, hex
    sa.Column("leader", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
)

# Everything the bot did or was refused on GitHub (the page /github and GET
# /api/v1/github/actions show it, newest first).
github_actions = sa.Table(
    "github_actions", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
    sa.Column("repo", sa.String(140), nullable=True),
    sa.Column("number", sa.Integer, nullable=True),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("http_status", sa.Integer, nullable=True),
)
