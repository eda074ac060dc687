// The job's Markdown report: the service's own (report.md) when it has one, else made here
// from the job's JSON in the same layout as `tvmrepro report --markdown`.
import { api } from "./common.js";

const PINNED = ["apache-tvm", "apache-tvm-ffi", "numpy"];
const MAX_MESSAGE_CHARS = 2000;
let serverHasReport = true;

function cellText(cell) {
  if (!cell.status) return cell.state;
  return `\`${cell.status}\`` + (cell.stage ? ` at \`${cell.stage}\`` : "");
}

function matrixTable(matrix) {
  const envs = matrix.environments;
  return [`| variant | ${envs.map((e) => `\`${e}\``).join(" | ")} |`, `| --- |${" --- |".repeat(envs.length)}`,
    ...matrix.variants.map((v, i) => `| \`${v}\` | ${matrix.cells[i].map(cellText).join(" | ")} |`)];
}

function errors(job) {
  const results = new Map(job.runs.map((r) => [`${r.variant}\u0000${r.environment}`, r.result || {}]));
  return job.matrix.groups.flatMap((group) => {
    const first = results.get(`${group.cells[0].variant}\u0000${group.cells[0].environment}`) || {};
    const where = group.cells.map((c) => `\`${c.variant}\` on \`${c.environment}\``).join(", ");
    const stage = first.stage ? ` at \`${first.stage}\`` : "";
    const text = [first.error_type, first.message].filter(Boolean).join(": ");
    return [`**${group.status}${stage}** in ${group.cells.length} cell(s): ${where}`, "",
            "```", text.slice(0, MAX_MESSAGE_CHARS), "```", ""];
  });
}

function comparisons(matrix) {
  return matrix.comparisons.flatMap((comp) => {
    const head = `\`${comp.a.variant}\` and \`${comp.b.variant}\` on \`${comp.a.environment}\``;
    if (comp.identical) return [`${head}: the IR is the same after every pass.`, ""];
    const step = comp.first_differing_pass;
    return [`${head} first differ after pass ${step.index} (\`${step.a}\` / \`${step.b}\`).`, "",
            "<details><summary>diff of the IR after that pass</summary>", "",
            "```diff", comp.diff.replace(/\n+$/, ""), "```", "", "</details>", ""];
  });
}

async function environments(job) {
  const found = new Map((await api("/api/v1/environments")).environments.map((e) => [e.id, e.packages]));
  return [`| environment | ${PINNED.join(" | ")} |`, `| --- |${" --- |".repeat(PINNED.length)}`,
    ...job.environments.map((id) => `| \`${id}\` | ${PINNED.map((p) => (found.get(id) || {})[p] || "?").join(" | ")} |`)];
}

async function build(job) {
  const lines = [`### ${job.title || `tvm-repro job ${job.id}`}`, "",
    `Reproduced with tvm-repro (job \`${job.id}\`, status \`${job.status}\`) on ` +
    `${job.environments.length} pinned TVM environment(s).`, "", ...matrixTable(job.matrix), ""];
  if (job.matrix.groups.length) lines.push("#### Errors (cells with the same signature grouped)", "", ...errors(job));
  if (job.matrix.comparisons.length) lines.push("#### Where the variants part", "", ...comparisons(job.matrix));
  lines.push("#### Environments", "", ...(await environments(job)), "");
  lines.push("<details><summary>The case</summary>", "", "```json", JSON.stringify(job.case, null, 2), "```", "",
             "</details>", "");
  return lines.join("\n");
}

/** The report of this job as Markdown. */
export async function reportMarkdown(base, job) {
  if (serverHasReport) {
    const response = await fetch(`${base}/report.md`);
    if (response.ok) return response.text();
    // The job exists (we have it), so a 404 here means this service has no report.md yet.
    if (response.status !== 404) throw new Error(`report.md: HTTP ${response.status}`);
    serverHasReport = false;
  }
  return build(job);
}
