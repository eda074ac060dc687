// A triage job's page: each report's verdict (live while its runs finish), the groups of
// reports that fail with one signature, and the audit of the issues' states.
import { api, cancelToken, el, fill, overText, pager, statusClass, when } from "./common.js";

const $ = (id) => document.getElementById(id);
const jobId = document.querySelector("script[data-job]").dataset.job;
const base = `/api/v1/jobs/${encodeURIComponent(jobId)}`;
const POLL_MS = 1000;
const MAX_POLL_MS = 5000;
let poll = POLL_MS;
let offset = 0; // the first report of the page shown (the API gives a page a read)
let timer = null;

const named = (number) => (number === null || number === undefined ? "the report" : `#${number}`);

/** A link to the issue only where its address is a plain https one (it came from an export). */
function issueLink(number, url) {
  return /^https:\/\/[\w.-]+\/[\w./#-]*$/.test(url || "")
    ? el("a", { href: url, rel: "noreferrer" }, named(number)) : named(number);
}

function verdictRow(line, i, triage) {
  const verdictClass = { reproduces: "st-error", fixed: "st-ok", never_reproduced: "st-ok" }[line.verdict] || "st-incompatible";
  return el("tr", { "data-number": line.number ?? "", "data-verdict": line.verdict },
    el("th", { scope: "row", title: triage.titles[i] }, issueLink(line.number, triage.urls[i]),
      line.state ? ` ${line.state}` : "", el("div", { class: "hint" }, triage.titles[i])),
    el("td", {}, el("span", { class: `badge ${verdictClass}` }, line.verdict),
      line.since ? ` since ${line.since}` : "",
      line.no_code ? el("span", { class: "hint" }, ` ${line.no_code}`) : null,
      line.incompatible ? el("span", { class: "hint" }, ` ${line.incompatible}`) : null),
    el("td", {}, line.group ? `group ${line.group}` : ""),
    el("td", {}, line.quoted_error_reproduced === null ? "" : line.quoted_error_reproduced ? "yes" : "no"),
    triage.environments.map((env) => {
      const status = line.statuses[env];
      return el("td", { class: `cell ${status ? statusClass(status) : ""}` }, status || "");
    }),
    el("td", {}, triage.jobs[i] ? el("a", { href: `/jobs/${encodeURIComponent(triage.jobs[i])}` }, "runs") : ""));
}

function renderVerdicts(job) {
  const triage = job.triage;
  fill($("verdicts"),
    el("thead", {}, el("tr", {}, el("th", {}, "report"), el("th", {}, "verdict"), el("th", {}, "group"),
      el("th", { title: "the error the report quotes is the one that happens now" }, "quoted error now"),
      triage.environments.map((env) => el("th", {}, el("code", {}, env))), el("th", {}, ""))),
    el("tbody", {}, triage.reports.map((line, i) => verdictRow(line, i, triage))));
  const left = triage.progress.reports - triage.progress.reports_done;
  fill($("pending"), left ? `${left} report${left === 1 ? "" : "s"} still running or waiting for a worker.` : "");
  pager($("report-pages"), triage.page, "reports", (start) => { offset = start; load(); });
}

function renderGroups(triage) {
  const shared = triage.groups.filter((g) => g.reports.length > 1);
  fill($("triage-groups"), shared.length ? shared.map((g) => el("li", { "data-group": g.id },
    `group ${g.id}: `, g.reports.map((n, i) => [i ? ", " : "", named(n)]),
    `, representative ${named(g.representative)}`, el("pre", { class: "signature-text" }, g.signature)))
    : el("li", { class: "hint" }, "No two reports fail with one signature (so far)."));
}

function renderAudit(triage) {
  fill($("audit"), triage.audit.length ? triage.audit.map((e) => el("li", { "data-finding": e.finding },
    `${named(e.number)} ${e.state}: ${e.finding.replaceAll("_", " ")}`, e.since ? ` (since ${e.since})` : ""))
    : el("li", { class: "hint" }, "No report is in the wrong state (so far)."));
}

function render(job) {
  const triage = job.triage;
  fill($("job-title"), job.title);
  document.title = `${job.title} \u00b7 tvm-repro`;
  $("job-status").className = `badge job-${job.status}`;
  fill($("job-status"), job.status);
  const p = triage.progress;
  fill($("triage-progress"), `triage job \u00b7 ${p.reports_done} of ${p.reports} reports done (${p.runs_done} of ${p.runs} runs) \u00b7 ${when(job.created_at)}`);
  fill($("job-over"), overText(job));
  $("cancel-job").hidden = triage.finished || !cancelToken(job.id);
  renderVerdicts(job);
  renderGroups(triage);
  renderAudit(triage);
}

function showError(message) {
  $("job-error").hidden = !message;
  fill($("job-error"), message || "");
}

async function cancelJob() {
  $("cancel-job").disabled = true;
  try {
    const done = await api(base, { method: "DELETE", headers: { "X-Cancel-Token": cancelToken(jobId) } });
    fill($("cancel-status"), `cancelled ${done.cancelled_runs} run${done.cancelled_runs === 1 ? "" : "s"}`);
  } catch (exc) {
    fill($("cancel-status"), exc.message);
  } finally {
    $("cancel-job").disabled = false;
  }
}

async function load() {
  clearTimeout(timer);
  try {
    const job = await api(`${base}?offset=${offset}`);
    showError("");
    render(job);
    if (job.triage.finished) return;
  } catch (exc) {
    showError(`Could not read the triage: ${exc.message}`);
    if (exc.status === 404) return;
  }
  timer = setTimeout(load, poll);
  poll = Math.min(MAX_POLL_MS, poll * 1.1);
}

$("cancel-job").addEventListener("click", () => cancelJob());
load();
