// Writes ../LICENSES.txt: name, version and licence text of every package in the bundle.
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const meta = JSON.parse(readFileSync("meta.json", "utf8"));
const roots = new Set();
for (const input of Object.keys(meta.inputs)) {
  const m = input.match(/^(node_modules\/(?:@[^/]+\/)?[^/]+)\//);
  if (m) roots.add(m[1]);
}
roots.add("node_modules/diff2html"); // its stylesheet is copied too
const parts = [];
for (const root of [...roots].sort()) {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const file = readdirSync(root).find((f) => /^(licen[cs]e|copying)/i.test(f));
  const text = file ? readFileSync(join(root, file), "utf8").trim() : "(no licence file shipped)";
  parts.push(`${pkg.name} ${pkg.version} (${pkg.license})\n${"=".repeat(60)}\n${text}\n`);
}
writeFileSync("../LICENSES.txt", parts.join("\n"));
console.log(`${roots.size} packages`);
