// Reduce and extract jobs: progress, the resulting case as TVMScript, passes and lines before
// and after; and the buttons on a failing cell that start one.
import { api, el, fill } from "./common.js";

const FAILING = new Set(["error", "crash", "timeout", "oom"]);
const CANCELLED = "cancelled: the best case so far"; // a reduction's last log line (worker/narrowing/reduction.py)

function passNames(c) {
  const passes = (c && c.variants && c.variants[0] && c.variants[0].passes) || [];
  return passes.map((p) => (typeof p === "string" ? p : p.name));
}

function progressText(found) {
  const p = found.progress;
  if (!p) return found.state === "queued" ? "waiting for a worker of this environment\u2026" : "";
  const sizes = [p.passes != null ? `${p.passes} passes` : null, p.lines != null ? `${p.lines} lines` : null,
                 p.runs ? `${p.runs} candidate runs` : null, `${p.seconds} s`].filter(Boolean);
  return `${p.phase}: ${p.what} (${sizes.join(", ")})`;
}

function summaryText(job, found) {
  if (found.error) return `No case: ${found.error}`;
  if (found.state === "failed") {
    return found.case ? "Cancelled (or its worker was lost): the best case so far is below."
      : "Ended without a case: cancelled, or its worker was lost.";
  }
  if (job.kind === "extract") {
    if (found.state !== "done") return progressText(found);
    return `The script fails at ${found.stage}; the case ${found.reproduces ? "gives the script's signature"
      : "does NOT reproduce the script"}.`;
  }
  const head = `Variant ${found.variant} on ${found.environment}, oracle ${found.oracle}, budget ${found.budget_s} s: `;
  if (found.state !== "done") return head + progressText(found);
  if (found.finished) return head + "every edit tried.";
  const log = found.log || [];
  const cancelled = log[log.length - 1] === CANCELLED;
  return head + (cancelled ? "cancelled; the best case so far is below." : "the budget ended it with the best case so far.");
}

function sizesTable(job, found) {
  if (job.kind !== "reduce" || !found.before) return [];
  const original = (job.case.variants || []).find((v) => v.name === found.variant);
  const rows = [["before", found.before, passNames({ variants: [original] })],
                ["after", found.after || found.before, passNames(found.case)]];
  return [el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "passes"), el("th", {}, "module lines"))),
    el("tbody", {}, rows.map(([name, size, passes]) => el("tr", { "data-row": name }, el("th", {}, name),
      el("td", {}, `${size.passes}: ${passes.join(", ") || "(none)"}`), el("td", {}, String(size.lines)))))];
}

/** Show a reduce or extract job's answer so far (the panel stays hidden for other jobs). */
export function renderNarrowing(job, parts) {
  const found = job.reduce || job.extract;
  parts.panel.hidden = !found;
  if (!found) return;
  fill(parts.heading, job.kind === "reduce" ? (found.state === "done" ? "Reduced" : "Reducing (best case so far)")
    : "Extracted");
  fill(parts.summary, summaryText(job, found));
  fill(parts.sizes, sizesTable(job, found));
  fill(parts.source, found.case ? found.case.source : "");
  parts.source.hidden = !found.case;
  fill(parts.steps, (found.log || []).map((line) => el("li", {}, line)));
}

/** A button for a failing cell of a run job: reduce it (module mode) or extract it (script). */
export function narrowButton(job, cell, onError) {
  if (job.kind !== "run" || !FAILING.has(cell.status)) return null;
  const kind = job.case.script ? "extract" : "reduce";
  const body = { kind, case: job.case, environments: [cell.environment] };
  if (kind === "reduce") body.variant = cell.variant;
  return el("button", { type: "button", class: "small narrow", title: kind === "reduce"
      ? "shrink this variant while it fails the same way" : "the module and passes where the script fails",
    onclick: async () => {
      try {
        const created = await api("/api/v1/jobs", { json: body });
        location.assign(`/jobs/${encodeURIComponent(created.id)}`);
      } catch (exc) { onError(`The service refused the ${kind} job: ${exc.message}`); }
    } }, kind);
}
