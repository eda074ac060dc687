// A job's page: the matrix (live while runs finish), groups, IR diffs, a cell's details, the report.
import { openCell } from "./cell.js";
import { api, cancelToken, el, fill, nextView, overText, statusClass, when } from "./common.js";
import { reportMarkdown } from "./report.js";
import { renderJobFiles } from "./files.js";
import { narrowButton, renderNarrowing } from "./narrow.js";
import { renderBisect, startBisect } from "./timeline.js";

const $ = (id) => document.getElementById(id);
const jobId = document.querySelector("script[data-job]").dataset.job;
const base = `/api/v1/jobs/${encodeURIComponent(jobId)}`;
const POLL_MS = 1000;
const MAX_POLL_MS = 5000; // a job that waits long (no worker yet) is asked less often
const WAIT_S = 20; // how long one request for the job's next change waits
const state = { job: null, etag: null, ticked: [], opened: null, poll: POLL_MS, matrixShown: null };

function finished(job) {
  return (job.status === "done" || job.status === "failed") && (!job.bisect || job.bisect.finished);
}

function cellLabel(cell) {
  if (!cell.status) return cell.state === "running" ? "running\u2026" : cell.state;
  return cell.stage ? `${cell.status} \u00b7 ${cell.stage}` : cell.status;
}

function groupIndex(matrix) {
  const found = new Map();
  matrix.groups.forEach((group, i) => group.cells.forEach((c) => found.set(`${c.variant}\u0000${c.environment}`, i + 1)));
  return found;
}

function matrixCell(cell, groups) {
  const group = groups.get(`${cell.variant}\u0000${cell.environment}`);
  const done = Boolean(cell.status);
  return el("td", { class: `cell ${statusClass(cell.status, cell.state)}${state.opened === cell.run ? " opened" : ""}`,
                    "data-run": cell.run, "data-status": cell.status || cell.state },
    el("button", { type: "button", class: "cell-open", disabled: !done,
                   onclick: () => open(cell.run) },
      el("span", { class: "label" }, cellLabel(cell)),
      group ? el("span", { class: "group-tag", title: "signature group" }, `#${group}`) : null,
      cell.cached ? el("span", { class: "cached", title: "the result of an earlier identical run" }, "cached") : null,
      cell.signature ? el("span", { class: "signature", title: cell.signature }, cell.signature) : null),
    narrowButton(state.job, cell, showError),
    done ? el("label", { class: "tick", title: "tick two cells to diff their IR" },
      el("input", { type: "checkbox", checked: state.ticked.includes(cell.run), onchange: (e) => tick(cell.run, e.target.checked) }),
      "diff") : null);
}

function renderMatrix(matrix) {
  // Rebuilt only when a cell or group changed: a view that brings only comparisons or a
  // bisection must not swap the cells under a pointer that is about to click one.
  const shown = JSON.stringify([matrix.environments, matrix.variants, matrix.cells, matrix.groups]);
  if (shown === state.matrixShown) return;
  state.matrixShown = shown;
  const groups = groupIndex(matrix);
  fill($("matrix"),
    el("thead", {}, el("tr", {}, el("th", {}, "variant \u2193 / environment \u2192"),
      matrix.environments.map((env) => el("th", {}, el("code", {}, env))))),
    el("tbody", {}, matrix.cells.map((row, i) => el("tr", {},
      el("th", { scope: "row" }, el("code", {}, matrix.variants[i])),
      row.map((cell) => matrixCell(cell, groups))))));
  fill($("groups"), matrix.groups.length ? el("h3", {}, "Signature groups (one bug, many places)") : null,
    el("ol", { class: "groups" }, matrix.groups.map((g) => el("li", {},
      el("span", { class: `badge ${statusClass(g.status)}` }, g.status), " in ",
      g.cells.map((c) => `${c.variant} on ${c.environment}`).join(", "),
      el("pre", { class: "signature-text" }, g.signature)))));
}

function renderComparisons(matrix) {
  fill($("comparisons"), matrix.comparisons.map((comp) => {
    const head = `${comp.a.variant} and ${comp.b.variant} on ${comp.a.environment}`;
    if (comp.identical) return el("li", {}, `${head}: the IR is the same after every pass.`);
    const step = comp.first_differing_pass;
    return el("li", {}, `${head} first differ after pass ${step.index} (${step.a ?? "none"} / ${step.b ?? "none"}) `,
      el("button", { type: "button", class: "small show-diff", onclick: () => showDiff(comp) }, "show the diff"));
  }));
  if (matrix.comparisons.length) return;
  fill($("comparisons"), el("li", { class: "hint" }, matrix.variants.length > 1
    ? "No comparison yet: it comes when two cells of an environment have finished."
    : "One variant: tick two cells to compare their IR."));
}

/** Show a comparison (a matrix one or a picked pair) as a side-by-side diff. */
async function showDiff(comp) {
  const { diffHtml } = await import("../vendor/diff.js"); // loaded when first needed
  const step = comp.first_differing_pass;
  fill($("diff-head"), comp.identical ? `${comp.a.variant}@${comp.a.environment} and ${comp.b.variant}@${comp.b.environment}: the same IR after every pass.`
    : `${comp.a.variant}@${comp.a.environment} (left) and ${comp.b.variant}@${comp.b.environment} (right), after pass ${step.index}: ${step.a ?? "none"} / ${step.b ?? "none"}`,
    comp.truncated ? " (diff truncated)" : "");
  // diff2html escapes every line and name it renders (the IR is text to it).
  $("diff").innerHTML = comp.diff ? diffHtml(comp.diff, { outputFormat: "side-by-side", drawFileList: false,
                                                           matching: "lines" }) : "";
  $("diff-panel").scrollIntoView({ block: "start" });
}

async function tick(runId, on) {
  state.ticked = state.ticked.filter((id) => id !== runId);
  if (on) state.ticked = [...state.ticked, runId].slice(-2);
  document.querySelectorAll("#matrix td.cell").forEach((td) => {
    const box = td.querySelector(".tick input");
    if (box) box.checked = state.ticked.includes(td.dataset.run);
  });
  if (state.ticked.length !== 2) return;
  const [a, b] = state.ticked;
  try {
    showDiff(await api(`${base}/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`));
  } catch (exc) { fill($("diff-head"), exc.message); }
}

function open(runId) {
  state.opened = runId;
  document.querySelectorAll("#matrix td.cell").forEach((td) => td.classList.toggle("opened", td.dataset.run === runId));
  const run = state.job.runs.find((r) => r.id === runId);
  openCell(`${base}/runs/${encodeURIComponent(runId)}`, run).catch((exc) => showError(exc.message));
}

function renderHead(job) {
  fill($("job-title"), job.title || `job ${job.id}`);
  document.title = `${job.title || `job ${job.id}`} \u00b7 tvm-repro`;
  const badge = $("job-status");
  badge.className = `badge job-${job.status}`;
  fill(badge, job.status);
  const cached = job.cached_runs ? `, ${job.cached_runs} from the cache` : "";
  fill($("job-over"), overText(job));
  fill($("job-meta"), `${job.kind} job \u00b7 ${job.runs.length} run${job.runs.length === 1 ? "" : "s"}${cached} \u00b7 ${when(job.created_at)}`);
  if (job.kind === "run") {
    $("bisect-actions").hidden = false;
    const select = $("bisect-variant");
    if (!select.options.length) {
      fill(select, job.variants.map((v) => el("option", { value: v }, v)));
      select.addEventListener("change", () => { select.dataset.chosen = "yes"; });
    }
    // Until someone picks one: the variant that fails (a bisection of an ok variant says little).
    const failing = job.matrix.groups[0]?.cells[0]?.variant;
    if (failing && !select.dataset.chosen) select.value = failing;
  }
}

/** The issues that a triage saw fail with a signature of this job's failures. */
function renderDuplicates(job) {
  const found = job.likely_duplicates || [];
  $("job-duplicates").hidden = !found.length;
  // A link only to a plain web address: the URL came from an issue export.
  const issueLink = (issue) => /^https:\/\/[\w.-]+\/[\w./#-]*$/.test(issue.url || "")
    ? el("a", { href: issue.url, rel: "noreferrer" }, `#${issue.number}`) : `#${issue.number}`;
  fill($("job-duplicates"), found.length ? "Likely duplicate of " : null,
    found.map((issue, i) => [i ? "; " : "", issueLink(issue), ` (${issue.title})`]),
    el("span", { class: "hint" }, ` \u00b7 a triage saw it fail with this job's signature`));
}

/** The cancel button: shown while runs wait or run, to the browser that submitted the job. */
function renderCancel(job) {
  $("cancel-job").hidden = finished(job) || !cancelToken(job.id);
}

async function cancelJob() {
  const token = cancelToken(jobId);
  if (!token) return fill($("cancel-status"), "only the browser that submitted this job can cancel it");
  $("cancel-job").disabled = true;
  try {
    const done = await api(base, { method: "DELETE", headers: { "X-Cancel-Token": token } });
    fill($("cancel-status"), `cancelled ${done.cancelled_runs} run${done.cancelled_runs === 1 ? "" : "s"}`);
  } catch (exc) {
    fill($("cancel-status"), exc.message);
  } finally {
    $("cancel-job").disabled = false;
  }
}

function showError(message) {
  const box = $("job-error");
  box.hidden = !message;
  fill(box, message || "");
}

async function renderReport(job) {
  fill($("report"), await reportMarkdown(base, job));
}

async function copyReport() {
  const text = await reportMarkdown(base, state.job);
  fill($("report"), text);
  try {
    await navigator.clipboard.writeText(text);
    fill($("copy-status"), "copied");
  } catch {
    // No clipboard permission (an insecure origin): select it for Ctrl+C instead.
    $("report-details").open = true;
    getSelection().selectAllChildren($("report"));
    fill($("copy-status"), "selected: press Ctrl+C");
  }
}

function render(job) {
  state.job = job;
  renderHead(job);
  renderCancel(job);
  renderDuplicates(job);
  renderJobFiles($("job-files"), job.files);
  renderMatrix(job.matrix);
  renderComparisons(job.matrix);
  renderBisect(job, $("bisect-panel"), $("bisect-summary"), $("timeline"));
  renderNarrowing(job, { panel: $("narrow-panel"), heading: $("narrow-heading"), summary: $("narrow-summary"),
                         sizes: $("narrow-sizes"), source: $("narrow-case"), steps: $("narrow-steps") });
}

async function load() {
  try {
    // A long-poll once a view is shown: the service answers when the job changes.
    const next = await nextView(base, state.etag, WAIT_S);
    showError("");
    state.etag = next.etag;
    const job = next.data || state.job;
    if (next.data) render(job);
    if (finished(job)) return renderReport(job);
    // Changed: asked again at once (a job that changes all the time, at most every 50 ms);
    // the wait over with no change: asked again at once.
    if (state.etag && (next.data || !next.early)) return void setTimeout(load, next.early ? 50 : 0);
  } catch (exc) {
    showError(`Could not read the job: ${exc.message}`);
    if (exc.status === 404) return;
  }
  // The service could not wait (or does not): asked again later, less often while it lasts.
  setTimeout(load, state.poll);
  state.poll = Math.min(MAX_POLL_MS, state.poll * 1.1);
}

$("cancel-job").addEventListener("click", () => cancelJob());
$("copy-report").addEventListener("click", () => copyReport().catch((exc) => fill($("copy-status"), exc.message)));
$("since-when").addEventListener("click", () => startBisect(state.job, $("bisect-variant").value,
  $("bisect-oracle").value, $("bisect-error")));
load();
