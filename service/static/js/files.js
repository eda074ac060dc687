// The case's files on the case page (a model, pickled inputs): chosen or dropped, read as base64,
// listed, removable; and a job's files as its page shows them.
import { el, fill } from "./common.js";

/** A size in bytes, as people read it. */
export function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1 << 20) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}

/** A file's content as base64 (what the API takes), read by the browser. */
function base64Of(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
    reader.onerror = () => reject(new Error(`${file.name}: ${reader.error?.message || "could not be read"}`));
    reader.readAsDataURL(file);
  });
}

/** The files of the case being written: `list` shows them; caps: {files, fileBytes, allBytes}. */
export class CaseFiles {
  constructor(list, caps, onChange = () => {}) {
    this.list = list;
    this.caps = caps;
    this.onChange = onChange;
    this.files = []; // {name, size, content}
  }

  /** Add the browser's files (one of a name already here replaces it); an Error over a cap. */
  async add(chosen) {
    const added = [];
    for (const file of chosen) {
      if (file.size > this.caps.fileBytes) {
        throw new Error(`${file.name}: ${size(file.size)}, over the cap of ${size(this.caps.fileBytes)} a file`);
      }
      added.push({ name: file.name, size: file.size, content: await base64Of(file) });
    }
    this.replace([...this.files.filter((f) => !added.some((a) => a.name === f.name)), ...added]);
  }

  /** The files of a loaded case (those with their content: a stored case's have none). */
  load(entries) {
    const given = (entries || []).filter((f) => typeof f.content === "string");
    this.replace(given.map((f) => ({ name: f.name, size: f.size ?? Math.floor(f.content.length * 3 / 4),
                                     content: f.content })));
    return (entries || []).length - given.length;
  }

  replace(files) {
    const total = files.reduce((sum, f) => sum + f.size, 0);
    if (files.length > this.caps.files) throw new Error(`${files.length} files, over the cap of ${this.caps.files}`);
    if (total > this.caps.allBytes) throw new Error(`${size(total)} in all, over the cap of ${size(this.caps.allBytes)}`);
    this.files = files;
    this.render();
    this.onChange();
  }

  remove(name) { this.replace(this.files.filter((f) => f.name !== name)); }

  /** What the case's `files` field says: each file's name and content. */
  entries() { return this.files.map(({ name, content }) => ({ name, content })); }

  render() {
    fill(this.list, this.files.map((f) => el("li", {},
      el("code", {}, f.name), ` ${size(f.size)} `,
      el("button", { type: "button", class: "icon", title: `remove ${f.name}`, onclick: () => this.remove(f.name) }, "\u00d7"))));
  }
}

/** A job's files: name, size and the start of the SHA-256, or nothing. */
export function renderJobFiles(node, files) {
  node.hidden = !files?.length;
  fill(node, files?.length ? "Files: " : null, (files || []).map((f, i) => [i ? "; " : "",
    el("code", {}, f.name), ` (${size(f.size)}, sha256 `, el("code", { title: f.sha256 }, f.sha256.slice(0, 12)), ")"]));
}
