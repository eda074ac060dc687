// Shared by the pages: building DOM from data (text only, never HTML) and talking to the API.

/** An element with attributes and children; strings become text nodes, so nothing is parsed. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** What a job is over: its environments, why those, and the releases of their device it did
 * not probe (its answer says nothing of them). */
export function overText(job) {
  const why = job.environments_why ? ` (${job.environments_why})` : "";
  const left = (job.not_probed || []).length ? `; not probed: ${job.not_probed.join(", ")}` : "";
  return `On ${job.environments.join(", ") || "no environment"}${why}${left}.`;
}

/** Replace an element's children (text only for strings). */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** An error the API answered with: its message and the field it names. */
export class ApiError extends Error {
  constructor(status, message, field) {
    super(field ? `${message} (field: ${field})` : message);
    this.status = status;
    this.field = field;
  }
}

/** Call the API of this origin; the JSON answer, or an ApiError with the API's own message. */
export async function api(path, options = {}) {
  const init = { ...options, headers: { Accept: "application/json", ...(options.headers || {}) } };
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.body = JSON.stringify(options.json);
    init.headers["Content-Type"] = "application/json";
  }
  const data = await answered(await fetch(path, init));
  if (data && typeof data.id === "string" && typeof data.cancel_token === "string") keepCancelToken(data);
  return data;
}

/** An answer's JSON, or an ApiError with the API's own message. */
async function answered(response) {
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const detail = data && data.error;
    throw new ApiError(response.status, detail ? detail.message : `HTTP ${response.status}: ${text.slice(0, 200)}`,
                       detail ? detail.field : null);
  }
  return data;
}

/**
 * A job's next view, by long-poll: the service answers once the job differs from the view whose
 * ETag is `etag`, or after `waitS` seconds. {data, etag, early}: data null when it did not change;
 * early when it said so before the wait was over (it could not wait: ask again later).
 */
export async function nextView(path, etag, waitS) {
  const started = Date.now();
  const headers = { Accept: "application/json", ...(etag ? { "If-None-Match": etag } : {}) };
  const response = await fetch(etag ? `${path}?wait=${waitS}` : path, { headers, cache: "no-store" });
  const early = Date.now() - started < waitS * 500;
  if (response.status === 304) return { data: null, etag, early };
  return { data: await answered(response), etag: response.headers.get("ETag"), early };
}

const tokenKey = (jobId) => `tvmrepro.cancel-token.${jobId}`;

/** Keep a submitted job's cancel token (given once, in the answer to its POST) in this browser. */
function keepCancelToken(job) {
  try { localStorage.setItem(tokenKey(job.id), job.cancel_token); } catch { /* storage off: no cancel here */ }
}

/** The cancel token this browser kept for a job it submitted, or null. */
export function cancelToken(jobId) {
  try { return localStorage.getItem(tokenKey(jobId)); } catch { return null; }
}

/** The CSS class of a status (or of a state while there is no status yet). */
export function statusClass(status, state) {
  return `st-${status || state || "queued"}`;
}

/** A short text for a time in seconds since the epoch, or an ISO string. */
export function when(value) {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

/**
 * The pager of a triage's reports or a sweep's cases (the API gives a page a read: ?offset=):
 * "1–50 of 200" with buttons for the pages before and after; `go(offset)` reads another.
 */
export function pager(node, page, unit, go) {
  if (!page || (page.offset === 0 && page.next_offset === null)) return fill(node);
  const last = page.offset + page.limit >= page.total ? page.total : page.offset + page.limit;
  const before = page.offset > 0 ? Math.max(0, page.offset - page.limit) : null;
  return fill(node, `${unit} ${page.total ? page.offset + 1 : 0}\u2013${last} of ${page.total} `,
    el("button", { type: "button", class: "small", disabled: before === null, onclick: () => go(before) }, "previous"),
    " ",
    el("button", { type: "button", class: "small", disabled: page.next_offset === null, onclick: () => go(page.next_offset) }, "next"));
}
