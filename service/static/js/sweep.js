// A sweep job's page: every stored case on the older and the new environment, and what changed.
import { api, el, fill, pager, statusClass, when } from "./common.js";

const $ = (id) => document.getElementById(id);
const jobId = document.querySelector("script[data-job]").dataset.job;
const base = `/api/v1/jobs/${encodeURIComponent(jobId)}`;
const POLL_MS = 1000;
const MAX_POLL_MS = 5000;
let poll = POLL_MS;
let offset = 0; // the first case of the page shown (the API gives a page a read)
let timer = null;

const CHANGE_CLASS = { fixed: "st-ok", regressed: "st-error", new_signature: "st-crash" };

function outcomeCell(outcome) {
  return el("td", { class: `cell ${statusClass(outcome.status)}`, title: outcome.signature || "" },
    outcome.status, outcome.signature ? el("span", { class: "signature" }, outcome.signature) : null);
}

function render(job) {
  const sweep = job.sweep;
  fill($("job-title"), job.title);
  document.title = `${job.title} \u00b7 tvm-repro`;
  $("job-status").className = `badge job-${job.status}`;
  fill($("job-status"), job.status);
  const p = sweep.progress;
  fill($("sweep-progress"), `sweep job \u00b7 ${p.cases_done} of ${p.cases} cases done (${p.runs_done} of ${p.runs} runs) \u00b7 ${when(job.created_at)}`);
  const counts = Object.entries(sweep.changed).map(([change, n]) => `${n} ${change.replaceAll("_", " ")}`);
  fill($("sweep-counts"), `${sweep.since} \u2192 ${sweep.env}: ${counts.join(", ") || "no cases"}`);
  fill($("sweep-cases"),
    el("thead", {}, el("tr", {}, el("th", {}, "case"), el("th", {}, "variant"),
      el("th", {}, el("code", {}, sweep.since)), el("th", {}, el("code", {}, sweep.env)), el("th", {}, "change"))),
    el("tbody", {}, sweep.cases.map((line, i) => el("tr", { "data-change": line.change },
      el("th", { scope: "row" }, el("a", { href: `/jobs/${encodeURIComponent(sweep.jobs[i])}` }, line.title || line.job)),
      el("td", {}, el("code", {}, line.variant)), outcomeCell(line.old), outcomeCell(line.new),
      el("td", {}, el("span", { class: `badge ${CHANGE_CLASS[line.change] || "st-incompatible"}` },
        line.change.replaceAll("_", " ")))))));
  pager($("case-pages"), sweep.page, "cases", (start) => { offset = start; load(); });
  fill($("sweep-more"), sweep.next_offset === null || sweep.next_offset === undefined ? "" :
    `The store held more stored cases than one sweep runs: a sweep with "offset": ${sweep.next_offset} runs the next ones.`);
}

async function load() {
  clearTimeout(timer);
  try {
    const job = await api(`${base}?offset=${offset}`);
    $("job-error").hidden = true;
    render(job);
    if (job.sweep.finished) return;
  } catch (exc) {
    $("job-error").hidden = false;
    fill($("job-error"), `Could not read the sweep: ${exc.message}`);
    if (exc.status === 404) return;
  }
  timer = setTimeout(load, poll);
  poll = Math.min(MAX_POLL_MS, poll * 1.1);
}

load();
