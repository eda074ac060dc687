// Bisect jobs: the probes over the releases as a timeline, and the "since when?" button.
import { api, el, fill } from "./common.js";

function summaryText(b) {
  const left = (b.not_in_range || []).length && b.verdict !== "changed"
    ? ` Not probed (no worker serves them): ${b.not_in_range.join(", ")}.` : "";
  return verdictText(b) + left;
}

function verdictText(b) {
  const progress = b.finished ? "" : ` (probes done: ${b.progress.done} of ${b.progress.total})`;
  const head = `Variant ${b.variant}, oracle ${b.oracle}: `;
  const changes = b.transitions.map((t) => `${t.from} \u2192 ${t.to} between ${t.before} and ${t.after}`);
  if (!b.finished && !changes.length) return `${head}probing the releases\u2026${progress}`;
  switch (b.verdict) {
    case "changed": {
      const unprobed = b.transitions[0].not_in_range || [];
      if (unprobed.length) {
        return `${head}changed between ${b.last_before_change} and ${b.first_changed} (${changes[0]}); not probed between them (no worker serves them): ${unprobed.join(", ")}: the change may lie there.${progress}`;
      }
      return `${head}changed in ${b.first_changed}; the last release before the change is ${b.last_before_change} (${changes[0]}).${progress}`;
    }
    case "unchanged":
      return `${head}no change over the releases probed.${progress}`;
    case "non_monotonic":
      return `${head}the behaviour changes ${b.transitions.length} times (it comes and goes): ${changes.join("; ")}.${progress}`;
    default: {
      const t = b.transitions[0];
      return `${head}one change (${changes[0]}), but it may lie in ${t ? t.candidates.join(", ") : "a release not decided"}.${progress}`;
    }
  }
}

function probeItem(env, probe, change, candidate) {
  const verdict = probe ? probe.verdict : "unprobed";
  const detail = probe && probe.status ? `${probe.status}${probe.stage ? ` \u00b7 ${probe.stage}` : ""}` : "";
  return el("li", { class: `probe v-${verdict}${candidate ? " candidate" : ""}`, "data-environment": env },
    change ? el("span", { class: "change", title: `${change.before} \u2192 ${change.after}` },
                `${change.from} \u2192 ${change.to}`) : null,
    el("code", {}, env), el("span", { class: "verdict" }, verdict),
    detail ? el("span", { class: "hint" }, detail) : null);
}

/** Show a bisect job's timeline (the panel stays hidden for other jobs). */
export function renderBisect(job, panel, summary, list) {
  const b = job.bisect;
  panel.hidden = !b;
  if (!b) return;
  const probes = new Map(b.probes.map((p) => [p.environment, p]));
  const changes = new Map(b.transitions.map((t) => [t.after, t]));
  const candidates = new Set(b.transitions.flatMap((t) => t.candidates));
  fill(summary, summaryText(b));
  fill(list, b.environments.map((env) => probeItem(env, probes.get(env), changes.get(env), candidates.has(env))));
  let windows = panel.querySelector("div.windows");
  if (!windows) {
    windows = el("div", { class: "windows" });
    list.after(windows);
  }
  fill(windows, b.transitions.filter((t) => t.window).map(windowItem));
}

/** A transition's commit window (compare link, what is missing) and its ranked suspects. */
function windowItem(t) {
  const w = t.window;
  const picked = w.picked ? ` (${w.picked} of them already in ${t.before} as cherry-picks)` : "";
  return el("section", { class: "window", "data-after": t.after },
    el("h4", {}, `${t.before} → ${t.after}: ${w.commits} commits${picked}`),
    w.compare_url ? el("a", { href: w.compare_url, rel: "noopener" }, "compare on GitHub") : null,
    w.history ? el("p", { class: "hint history" },
      `History: ${w.history}${w.history_newest ? `, newest commit ${w.history_newest.slice(0, 10)}` : ""}`) : null,
    w.open_ended ? el("p", { class: "hint open-ended" }, `Open-ended: ${w.missing}`) : null,
    (t.suspects || []).length
      ? el("ol", { class: "suspects" }, t.suspects.map((s) => el("li", {},
          el("a", { href: s.url, rel: "noopener" }, s.pr ? `#${s.pr}` : s.sha.slice(0, 10)),
          ` ${s.subject} `, el("span", { class: "score" }, `score ${s.score.toFixed(2)}`),
          el("ul", { class: "reasons" }, s.reasons.map((r) => el("li", {}, r))))))
      : el("p", { class: "hint" }, "No commit of the window shows the evidence."));
}

/** POST a bisect job for this job's case over its device's served releases; go to its page. */
export async function startBisect(job, variant, oracle, errorBox) {
  errorBox.hidden = true;
  try {
    const { environments } = await api("/api/v1/environments");
    const devices = new Set(environments.filter((e) => job.environments.includes(e.id)).map((e) => e.device));
    const chosen = environments.filter((e) => devices.has(e.device) && e.workers > 0).map((e) => e.id);
    const created = await api("/api/v1/jobs", { json: { kind: "bisect", case: job.case, variant, oracle,
                                                        environments: chosen } });
    location.assign(`/jobs/${encodeURIComponent(created.id)}`);
  } catch (exc) {
    errorBox.hidden = false;
    fill(errorBox, `The service refused the bisection: ${exc.message}`);
  }
}
