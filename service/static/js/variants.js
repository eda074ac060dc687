// The variants of a module-mode case: named pass lists, one input per pass (with completion).
import { el, fill } from "./common.js";

const fit = (text) => Math.max(10, (text || "").length + 1); // an input as wide as its pass name

function passInput(pass) {
  const spec = typeof pass === "string" ? { name: pass } : pass;
  const args = spec.args && Object.keys(spec.args).length ? JSON.stringify(spec.args) : null;
  const input = el("input", { class: "pass", list: "pass-names", value: spec.name || "", size: fit(spec.name),
                              placeholder: "pass name", "aria-label": "pass", "data-args": args,
                              oninput: (e) => { e.target.size = fit(e.target.value); } });
  return el("span", { class: "pass-item" }, input,
    args ? el("span", { class: "args", title: args }, "args") : null,
    el("button", { type: "button", class: "icon", title: "remove this pass", "aria-label": "remove pass",
                   onclick: (e) => e.currentTarget.parentElement.remove() }, "\u00d7"));
}

function variantRow(variant) {
  const passes = el("span", { class: "passes" }, (variant.passes || []).map(passInput));
  return el("div", { class: "variant" },
    el("div", { class: "variant-head" },
      el("input", { class: "variant-name", value: variant.name || "", size: 14, placeholder: "name",
                    "aria-label": "variant name" }),
      el("button", { type: "button", class: "icon", title: "remove this variant", "aria-label": "remove variant",
                     onclick: (e) => e.currentTarget.closest(".variant").remove() }, "\u00d7")),
    passes,
    el("button", { type: "button", class: "small add-pass",
                   onclick: () => { const item = passInput(""); passes.append(item); item.firstChild.focus(); } },
       "+ pass"));
}

/** Show these variants in `box`, replacing what it had. */
export function renderVariants(box, variants) {
  fill(box, variants.map(variantRow));
}

/** The variants as the inputs say (empty pass inputs left out). */
export function readVariants(box) {
  return [...box.querySelectorAll(".variant")].map((row) => ({
    name: row.querySelector(".variant-name").value.trim(),
    passes: [...row.querySelectorAll("input.pass")].filter((i) => i.value.trim()).map((i) => {
      const name = i.value.trim();
      return i.dataset.args ? { name, args: JSON.parse(i.dataset.args) } : name;
    }),
  }));
}

/** The input an API field such as case.variants[0].passes[1] names, or null. */
export function variantField(box, field) {
  const m = /^case\.variants\[(\d+)\](?:\.(name|passes)(?:\[(\d+)\])?)?/.exec(field);
  if (!m) return null;
  const row = box.querySelectorAll(".variant")[Number(m[1])];
  if (!row || !m[2]) return row || null;
  if (m[2] === "name") return row.querySelector(".variant-name");
  const passes = [...row.querySelectorAll("input.pass")].filter((i) => i.value.trim());
  return m[3] === undefined ? row.querySelector(".passes") : passes[Number(m[3])] || null;
}

/** Offer these pass names to every pass input. */
export function setPassNames(datalist, names) {
  fill(datalist, names.map((name) => el("option", { value: name })));
}
