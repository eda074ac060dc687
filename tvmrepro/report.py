"""A job as a report ready to paste into a TVM issue (GitHub-flavoured Markdown)."""

from __future__ import annotations

import json

from tvmrepro.bisect_report import render_bisect
from tvmrepro.environments import Catalog, default_catalog
from tvmrepro.models import Cell, JobView, Matrix
from tvmrepro.reduce_report import render_reduce

PINNED = ("apache-tvm", "apache-tvm-ffi", "numpy")
MAX_MESSAGE_CHARS = 2000


def _cell_text(cell: Cell) -> str:
    if cell.status is None:
        return str(cell.state.value)
    return f"`{cell.status}`" + (f" at `{cell.stage}`" if cell.stage else "")


def _matrix_table(matrix: Matrix) -> list[str]:
    envs = matrix.environments
    lines = ["| variant | " + " | ".join(f"`{e}`" for e in envs) + " |",
             "| --- |" + " --- |" * len(envs)]
    for variant, row in zip(matrix.variants, matrix.cells, strict=True):
        lines.append(f"| `{variant}` | " + " | ".join(_cell_text(c) for c in row) + " |")
    return lines


def _errors(job: JobView) -> list[str]:
    messages = {(r.variant, r.environment): (r.result or {}) for r in job.runs}
    lines = []
    for group in job.matrix.groups:
        cells = group.cells
        first = messages[(cells[0].variant, cells[0].environment)]
        where = ", ".join(f"`{c.variant}` on `{c.environment}`" for c in cells)
        stage = f" at `{first['stage']}`" if first.get("stage") else ""
        text = f"{first.get('error_type') or ''}: {first.get('message') or ''}".strip(": ")
        lines += [f"**{group.status}{stage}** in {len(cells)} cell(s): {where}", "",
                  "```", text[:MAX_MESSAGE_CHARS], "```", ""]
    return lines


def _comparisons(matrix: Matrix) -> list[str]:
    lines = []
    for comp in matrix.comparisons:
        head = f"`{comp.a.variant}` and `{comp.b.variant}` on `{comp.a.environment}`"
        step = comp.first_differing_pass
        if comp.identical or step is None:
            lines += [f"{head}: the IR is the same after every pass.", ""]
            continue
        lines += [f"{head} first differ after pass {step.index} (`{step.a}` / `{step.b}`).", "",
                  "<details><summary>diff of the IR after that pass</summary>", "",
                  "```diff", comp.diff.rstrip("\n"), "```", "", "</details>", ""]
    return lines


def _environments(job: JobView, catalog: Catalog) -> list[str]:
    lines = ["| environment | " + " | ".join(PINNED) + " |", "| --- |" + " --- |" * len(PINNED)]
    known = set(catalog.ids)
    for env_id in job.environments:
        pins = catalog.get(env_id).packages if env_id in known else {}
        lines.append(f"| `{env_id}` | " + " | ".join(pins.get(p, "?") for p in PINNED) + " |")
    return lines


def render_report(job: JobView, catalog: Catalog | None = None) -> str:
    """The report of a finished (or unfinished) job, as Markdown."""
    catalog = catalog or default_catalog()
    title = job.title or f"tvm-repro job {job.id}"
    lines = [f"### {title}", "",
             f"Reproduced with tvm-repro (job `{job.id}`, status `{job.status.value}`) on "
             f"{len(job.environments)} pinned TVM environment(s).", ""]
    # The bisect section is shared with local bisections, which have no job: it reads JSON.
    lines += (_matrix_table(job.matrix) + [""]
              + render_bisect(job.model_dump(mode="json"), catalog)
              + render_reduce(job.model_dump(mode="json")))
    if job.matrix.groups:
        lines += ["#### Errors (cells with the same signature grouped)", ""] + _errors(job)
    if job.matrix.comparisons:
        lines += ["#### Where the variants part", ""] + _comparisons(job.matrix)
    lines += ["#### Environments", ""] + _environments(job, catalog) + [""]
    lines += ["<details><summary>The case</summary>", "", "```json",
              json.dumps(job.case, indent=2), "```", "", "</details>", ""]
    return "\n".join(lines)
