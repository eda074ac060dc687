// The case page: an editor, the variants with pass-name completion, the environments; submit.
import { EditorView, basicSetup, python } from "../vendor/editor.js";
import { api, el, fill } from "./common.js";
import { variantField, readVariants, renderVariants, setPassNames } from "./variants.js";
import { CaseFiles } from "./files.js";

const $ = (id) => document.getElementById(id);
const examplesBase = document.querySelector("script[data-examples]").dataset.examples;
const caps = document.querySelector("script[data-max-files]").dataset;
const files = new CaseFiles($("file-list"), { files: Number(caps.maxFiles), fileBytes: Number(caps.maxFileBytes),
                                              allBytes: Number(caps.maxFilesBytes) });
let loaded = {};          // the fields of a loaded case that the form has no input for
let passNames = {};       // environment id -> its TVM's pass names
let environments = [];
let defaultWhy = "the default";  // what the default set is, as the service says

const editor = new EditorView({
  parent: $("editor"),
  extensions: [basicSetup, python(), EditorView.updateListener.of(onEdit)],
});

function setSource(text) {
  editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: text },
                    selection: { anchor: 0 }, effects: EditorView.scrollIntoView(0) });
}

// A whole case pasted into the editor fills the form instead of becoming the source.
function onEdit(update) {
  if (!update.docChanged || !update.transactions.some((tr) => tr.isUserEvent("input.paste"))) return;
  const text = update.state.doc.toString().trim();
  if (!text.startsWith("{")) return;
  let data;
  try { data = JSON.parse(text); } catch { return; }
  if (data && typeof data === "object" && ("source" in data || "script" in data)) {
    queueMicrotask(() => { loadCase(data); notice("The pasted case (JSON) filled the form."); });
  }
}

function notice(text) { fill($("source-notice"), text); }

function setMode(mode) {
  document.querySelector(`input[name=mode][value=${mode}]`).checked = true;
  $("variants-panel").hidden = mode === "script";
}

function mode() { return document.querySelector("input[name=mode]:checked").value; }

function loadCase(data) {
  const { title, source, script, module, variants, target, opt_level, entry, inputs,
          timeout_s, memory_mb, files: given, ...rest } = data;
  loaded = { ...rest, inputs: { ...(inputs || {}) } };
  const withoutContent = files.load(given);
  if (withoutContent) notice(`${withoutContent} of the case's files came without their content: add them below.`);
  $("title").value = title || "";
  setMode(script !== undefined && script !== null ? "script" : "module");
  setSource(script ?? source ?? "");
  $("module").value = module || "Module";
  renderVariants($("variants"), variants || [{ name: "default", passes: [""] }]);
  $("target").value = target || "";
  $("opt_level").value = opt_level ?? 3;
  $("entry").value = entry || "";
  $("seed").value = inputs?.seed ?? 0;
  $("timeout_s").value = timeout_s ?? 120;
  $("memory_mb").value = memory_mb ?? 4096;
}

async function pickExample() {
  const name = $("example").value;
  if (!name) return;
  loadCase(await api(`${examplesBase}${name}.json`));
  notice("");
}

async function openFile() {
  const file = $("case-file").files[0];
  if (!file) return;
  const text = await file.text();
  if (file.name.endsWith(".json")) {
    try { loadCase(JSON.parse(text)); } catch (exc) { return showError(`${file.name}: ${exc.message}`); }
  } else {
    loadCase({ title: file.name, script: text });
  }
  notice(`Opened ${file.name}.`);
}

function int(id) {
  const value = $(id).value.trim();
  return value === "" ? undefined : Number(value);
}

/** The case as the form says (fields it does not show are kept from the loaded case). */
function readCase() {
  const found = { ...loaded, title: $("title").value };
  const text = editor.state.doc.toString();
  if (mode() === "script") found.script = text;
  else Object.assign(found, { source: text, module: $("module").value.trim() || "Module",
                              variants: readVariants($("variants")) });
  const target = $("target").value.trim();
  const entry = $("entry").value.trim();
  if (target) found.target = target;
  found.entry = entry || null;
  found.opt_level = int("opt_level");
  found.timeout_s = int("timeout_s");
  found.memory_mb = int("memory_mb");
  found.inputs = { ...(loaded.inputs || {}), seed: int("seed") ?? 0 };
  if (files.files.length) found.files = files.entries();
  for (const key of Object.keys(found)) if (found[key] === undefined) delete found[key];
  return found;
}

function renderEnvironments() {
  const device = $("device").value;
  const idle = $("show-idle").checked;
  const list = $("environments");
  const previous = new Map([...list.querySelectorAll("input")].map((i) => [i.value, i.checked]));
  const shown = environments.filter((e) => (!device || e.device === device) && (idle || e.workers > 0));
  // Ticked at first: the default set, as a job that names none gets it (of it, those served);
  // every served one only where no release of the default set is served.
  const anyDefault = shown.some((e) => e.default && e.workers > 0);
  const ticked = (e) => e.workers > 0 && (e.default || !anyDefault);
  fill($("environments-why"), anyDefault ? `Ticked: ${defaultWhy} (those a worker serves).`
    : "No release of the default set has a worker: ticked, every one that has.");
  fill(list, shown.length ? shown.map((env) => el("label", { class: env.workers ? "env" : "env idle" },
    el("input", { type: "checkbox", name: "environment", value: env.id,
                  checked: previous.get(env.id) ?? ticked(env), onchange: updatePassNames }),
    el("code", {}, env.id), env.default ? el("span", { class: "badge default" }, "default") : null,
    el("span", { class: "hint" }, env.workers ? `${env.workers} worker${env.workers > 1 ? "s" : ""}` : "no worker",
       env.state === "building" ? ", building its image" : "",
       env.waiting ? `, ${env.waiting} waiting` : ""))) :
    el("p", { class: "hint" }, "No environment has a live worker; tick \u201cshow those without a worker\u201d."));
  updatePassNames();
}

function chosenEnvironments() {
  return [...$("environments").querySelectorAll("input:checked")].map((i) => i.value);
}

function updatePassNames() {
  const chosen = chosenEnvironments();
  const names = new Set(chosen.flatMap((id) => passNames[id] || []));
  setPassNames($("pass-names"), [...names].sort());
  fill($("pass-hint"), names.size ? `${names.size} pass names offered from ${chosen.join(", ")}.`
    : "Pass names appear once a worker of a chosen environment has reported them.");
}

const FIELD_INPUTS = { "case.title": "title", "case.source": "editor", "case.script": "editor",
  "case.module": "module", "case.target": "target", "case.opt_level": "opt_level", "case.entry": "entry",
  "case.inputs": "seed", "case.timeout_s": "timeout_s", "case.memory_mb": "memory_mb", "environments": "environments",
  "case.variants": "variants", "case.files": "drop-files", "case": "editor" };

/** The input that an API error's field names (e.g. case.variants[0].passes[1]), if shown. */
function fieldTarget(field) {
  if (!field) return null;
  const inVariants = variantField($("variants"), field);
  if (inVariants) return inVariants;
  const key = Object.keys(FIELD_INPUTS).sort((a, b) => b.length - a.length).find((k) => field.startsWith(k));
  return key ? $(FIELD_INPUTS[key]) : null;
}

function showError(message) {
  const box = $("form-error");
  box.hidden = false;
  fill(box, message);
}

async function submit(event) {
  event.preventDefault();
  $("form-error").hidden = true;
  document.querySelectorAll(".invalid").forEach((n) => n.classList.remove("invalid"));
  $("submit").disabled = true;
  try {
    const job = await api("/api/v1/jobs", { json: { kind: "run", case: readCase(),
      environments: chosenEnvironments(), bypass_cache: $("bypass_cache").checked } });
    location.assign(`/jobs/${encodeURIComponent(job.id)}`);
  } catch (exc) {
    showError(exc.message);
    fieldTarget(exc.field)?.classList.add("invalid");
    $("submit").disabled = false;
  }
}

async function start() {
  $("example").addEventListener("change", () => pickExample().catch((e) => showError(e.message)));
  $("case-file").addEventListener("change", () => openFile().catch((e) => showError(e.message)));
  document.querySelectorAll("input[name=mode]").forEach((r) => r.addEventListener("change", () => setMode(mode())));
  $("add-variant").addEventListener("click", () => {
    renderVariants($("variants"), [...readVariants($("variants")), { name: "", passes: [""] }]);
  });
  $("device").addEventListener("change", renderEnvironments);
  $("show-idle").addEventListener("change", renderEnvironments);
  $("case-form").addEventListener("submit", submit);
  const addFiles = (chosen) => files.add([...chosen]).then(() => { $("form-error").hidden = true; })
    .catch((e) => showError(e.message));
  $("attach-files").addEventListener("change", (e) => { addFiles(e.target.files); e.target.value = ""; });
  const zone = $("drop-files");
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("dragging"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("dragging");
    addFiles(e.dataTransfer.files);
  });
  renderVariants($("variants"), [{ name: "default", passes: [""] }]);
  const [envs, passes] = await Promise.all([api("/api/v1/environments"), api("/api/v1/passes")]);
  environments = envs.environments;
  defaultWhy = envs.default_why || defaultWhy;
  passNames = passes.environments;
  renderEnvironments();
}

start().catch((exc) => showError(`The service did not answer: ${exc.message}`));
