// One cell of the matrix: its summary, log, per-pass function table, and the IR after each pass.
import { api, el, fill, statusClass } from "./common.js";

const $ = (id) => document.getElementById(id);
const results = new Map(); // run URL -> full result (a finished result never changes)
let current = null;        // { result, run, tab, pass }
let irView = null;

function summary(result, run) {
  const rows = [
    ["status", el("span", { class: `badge ${statusClass(result.status)}` }, result.status)],
    ["stage", result.stage], ["error", [result.error_type, result.message].filter(Boolean).join(": ")],
    ["signature", result.signature], ["signal", result.signal],
    ["TVM", result.tvm && result.tvm.version], ["seconds", result.seconds && result.seconds.total],
    ["porting rules applied", (result.rewrites || []).join(", ")],
    ["outputs", result.outputs ? JSON.stringify(result.outputs) : null],
    ["layer", result.layer ? `${result.layer.layer || "not placed"}: ${result.layer.reason} (${result.layer.evidence.map((p) => `${p.path} ${p.failed_in ? `fails in ${p.failed_in}` : p.outputs || p.status}`).join(", ")})` : null],
    ["from the cache", run && run.cached ? `yes (run ${run.cached_from})` : null],
  ];
  return el("dl", { class: "summary" }, rows.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => [el("dt", {}, k), el("dd", {}, typeof v === "string" && v.length > 80 ? el("pre", {}, v) : v)]));
}

function logView(result) {
  const log = result.log || {};
  const stream = (name, text) => [el("h3", {}, name), text ? el("pre", { class: `log log-${name}` }, text)
                                                            : el("p", { class: "hint" }, "(empty)")];
  return el("div", {}, stream("stderr", log.stderr), stream("stdout", log.stdout),
    log.truncated ? el("p", { class: "hint" }, "The output was truncated at the cap.") : null);
}

function passTable(result) {
  if (!result.passes || !result.passes.length) return el("p", { class: "hint" }, "No pass ran.");
  return el("table", { class: "passes-table" },
    el("thead", {}, el("tr", {}, ["# (from 0, as in the stage)", "pass", "seconds", "functions after it"].map((h) => el("th", {}, h)))),
    el("tbody", {}, result.passes.map((p, i) => el("tr", {},
      el("td", {}, String(i)),
      el("td", {}, el("button", { type: "button", class: "link", onclick: () => show("ir", i) }, p.name)),
      el("td", {}, p.seconds === undefined ? "" : Number(p.seconds).toFixed(3)),
      el("td", {}, el("ul", { class: "functions" }, (p.functions || []).map((f) =>
        el("li", {}, el("code", {}, f.name), ` ${f.kind || ""}`))))))));
}

let editor = null; // CodeMirror, loaded when an IR is first shown

async function irPane(result, index) {
  const passes = result.passes || [];
  if (!passes.length) return el("p", { class: "hint" }, "No IR: no pass ran.");
  const select = el("select", { id: "ir-pass", onchange: (e) => show("ir", Number(e.target.value)) },
    passes.map((p, i) => el("option", { value: String(i), selected: i === index }, `after pass ${i}: ${p.name}`)));
  const host = el("div", { class: "ir-editor" });
  editor = editor || await import("../vendor/editor.js");
  const { EditorState, EditorView, basicSetup, python } = editor;
  irView?.destroy();
  // A read-only editor: the IR is TVMScript (Python), highlighted, searchable, never parsed as HTML.
  irView = new EditorView({ parent: host, doc: passes[index].ir || "",
    extensions: [basicSetup, python(), EditorState.readOnly.of(true), EditorView.editable.of(false)] });
  return el("div", {}, el("label", {}, "IR ", select), host);
}

async function show(tab, pass = current.pass) {
  current.tab = tab;
  current.pass = Math.min(pass, Math.max(0, (current.result.passes || []).length - 1));
  document.querySelectorAll("#cell-panel .tab").forEach((b) => b.classList.toggle("active", b.dataset.tab === tab));
  const body = $("cell-body");
  if (tab === "summary") fill(body, summary(current.result, current.run));
  else if (tab === "log") fill(body, logView(current.result));
  else if (tab === "passes") fill(body, passTable(current.result));
  else fill(body, await irPane(current.result, current.pass));
}

/** Open a finished run's details below the matrix (its full result fetched once). */
export async function openCell(url, run) {
  if (!results.has(url)) results.set(url, await api(url));
  const result = results.get(url);
  const stage = (result.passes || []).length - 1;
  current = { result, run, tab: current?.tab || "summary", pass: stage };
  fill($("cell-title"), `${result.variant} on ${result.environment}`);
  $("cell-panel").hidden = false;
  await show(current.tab, stage);
  $("cell-panel").scrollIntoView({ block: "start" });
}

document.querySelectorAll("#cell-panel .tab").forEach((b) => b.addEventListener("click", () => show(b.dataset.tab)));
