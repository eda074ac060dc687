"""A job as a report ready to paste into a TVM issue (GitHub-flavoured Markdown).

Its first screen concludes (which releases fail, which pass, since when), names each
failure's signature, gives the command that reproduces it without tvm-repro, and the matrix.
Below, each in a `<details>` block a reader opens when needed: the errors grouped by
signature, per failing environment its exact pins and a standalone script, the symbol trace,
where the variants part (one diff when it is the same everywhere), the environments and the
case.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tvmrepro.api.views import Cell, Comparison, JobView, Matrix
from tvmrepro.choice import over_markdown
from tvmrepro.environments import Catalog, default_catalog
from tvmrepro.escaping import code_block, code_span, table_cell
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.pass_numbers import FROM_ZERO_MARKDOWN, after_pass
from tvmrepro.reproducer import known_rewrites, reproducer
from tvmrepro.results import FAILING

PINNED = ("apache-tvm", "apache-tvm-ffi", "numpy")
MAX_MESSAGE_CHARS = 2000
_PLAIN_URL = re.compile(r"https://[\w.-]+/[\w./#-]*")


def _release(env_id: str, catalog: Catalog) -> str:
    return catalog.get(env_id).release if env_id in catalog.ids else code_span(env_id)


def _span(env_ids: list[str], catalog: Catalog) -> str:
    releases = [_release(e, catalog) for e in env_ids]
    return releases[0] if len(releases) == 1 else f"{releases[0]} → {releases[-1]}"


def _variant_verdict(variant: str, row: list[Cell], catalog: Catalog) -> str:
    """One sentence: where this variant fails and where it passes."""
    failing = [c.environment for c in row if c.status in FAILING]
    passing = [c.environment for c in row if c.status == "ok"]
    differs = [c.environment for c in row if c.outputs == "differs"]
    done = [c for c in row if c.status is not None]
    name = code_span(variant)
    if not done:
        return f"{name}: no result yet"
    if failing and len(failing) == len(done):
        kinds = sorted({c.status or "" for c in row if c.status in FAILING})
        text = (f"{name} fails ({', '.join(kinds)}) on every tested release "
                f"({_span(failing, catalog)}, {len(failing)} release(s))")
    elif failing:
        text = (f"{name} fails on {', '.join(_release(e, catalog) for e in failing)} and "
                f"passes on {', '.join(_release(e, catalog) for e in passing) or 'none'}")
    elif passing and len(passing) == len(done):
        text = f"{name} passes on every tested release ({_span(passing, catalog)})"
    else:
        text = f"{name}: " + ", ".join(f"{code_span(c.status)} on "
                                       f"{_release(c.environment, catalog)}" for c in done)
    if differs:
        text += f"; its outputs differ on {', '.join(_release(e, catalog) for e in differs)}"
    return text


def conclusion(job: JobView, catalog: Catalog) -> str:
    """The report's first line: what fails where (and since when, for a bisection)."""
    matrix = job.matrix
    parts = [_variant_verdict(v, row, catalog) for v, row in zip(matrix.variants, matrix.cells,
                                                                 strict=True)]
    bisect = job.bisect
    if bisect is not None and bisect.verdict == "changed" and bisect.first_changed:
        unprobed = bisect.transitions[0].not_in_range if bisect.transitions else []
        parts.append(f"it changed in {_release(bisect.first_changed, catalog)} "
                     f"(last before: {_release(bisect.last_before_change or '', catalog)})"
                     if not unprobed else
                     f"it changed between {_release(bisect.last_before_change or '', catalog)} "
                     f"and {_release(bisect.first_changed, catalog)}; not probed between "
                     f"them: {', '.join(_release(e, catalog) for e in unprobed)}")
    elif bisect is not None and bisect.finished:
        parts.append(f"bisection: {code_span(bisect.verdict.replace('_', '-'))}")
    layers = _layer_part(job, catalog)
    if layers:
        parts.append(layers)
    return "**" + "; ".join(parts) + ".**"


def _layer_part(job: JobView, catalog: Catalog) -> str | None:
    """Where the failure first shows, for runs that asked (docs/layers.md): each layer with the
    releases it was placed on, e.g. `pass:FuseTIR` on one and `import` on two (by variant
    where the job has several)."""
    placed: dict[tuple[str, str], list[str]] = {}
    for run in job.runs:
        layer = ((run.result or {}).get("layer") or {}).get("layer")
        if layer:
            placed.setdefault((run.variant, layer), []).append(run.environment)
    if not placed:
        return None
    several = len(job.matrix.variants) > 1
    said = [f"{code_span(layer)}{f' in {code_span(variant)}' if several else ''} on "
            f"{', '.join(_release(env, catalog) for env in envs)}"
            for (variant, layer), envs in placed.items()]
    return "the failure first shows in " + "; ".join(said)


def _cell_text(cell: Cell) -> str:
    if cell.status is None:
        return str(cell.state.value)
    text = table_cell(cell.status) + (f" at {table_cell(cell.stage)}" if cell.stage else "")
    if cell.outputs == "differs" and cell.output_error is not None:
        error = cell.output_error
        size = f" max abs {error.max_abs_error:.3g}" if error.max_abs_error is not None else ""
        reason = error.reason if error.reason.isalpha() else table_cell(error.reason)
        text += f", outputs differ ({reason}{size})"
    return text


def _matrix_table(matrix: Matrix) -> list[str]:
    envs = matrix.environments
    lines = ["| variant | " + " | ".join(table_cell(e) for e in envs) + " |",
             "| --- |" + " --- |" * len(envs)]
    for variant, row in zip(matrix.variants, matrix.cells, strict=True):
        lines.append(f"| {table_cell(variant)} | " + " | ".join(_cell_text(c) for c in row) + " |")
    return lines


def _results(job: JobView) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r.variant, r.environment): (r.result or {}) for r in job.runs}


def _errors(job: JobView) -> list[str]:
    results = _results(job)
    lines = []
    for group in job.matrix.groups:
        cells = group.cells
        first = results[(cells[0].variant, cells[0].environment)]
        where = ", ".join(f"{code_span(c.variant)} on {code_span(c.environment)}"
                          for c in cells)
        stage = f" at {code_span(first['stage'])}" if first.get("stage") else ""
        text = f"{first.get('error_type') or ''}: {first.get('message') or ''}".strip(": ")
        if first.get("native_frames"):  # a crash: where in TVM, innermost first
            text += "\nnative frames: " + " < ".join(first["native_frames"])
        lines += [f"**{code_span(group.status)}{stage}** in {len(cells)} cell(s): {where}", "",
                  *code_block(text[:MAX_MESSAGE_CHARS]), ""]
    return lines


def _pip_line(env_id: str, catalog: Catalog, frontends: bool = False) -> str:
    """The pins a run had: its environment's, with the frontend ones where it ran with them."""
    if env_id not in catalog.ids:
        return f"# {env_id}: pins unknown to this service"
    env = catalog.get(env_id)
    return "pip install " + " ".join((env.with_frontends() if frontends else env).requirements())


def _with_frontends(job: JobView) -> bool:
    """Whether the job's runs had the frontend packages (the case imports torch or onnx)."""
    return any((r.result or {}).get("frontends") for r in job.runs)


def _script(job: JobView, run_view: Any, catalog: Catalog) -> str:
    """The standalone script of a run, made here from the case (never the run's own text)."""
    env_id = run_view.environment
    known = env_id in catalog.ids
    return reproducer(job.case, run_view.variant,
                      catalog.get(env_id).release if known else env_id,
                      catalog.get(env_id).target if known else "llvm",
                      (run_view.result or {}).get("rewrites"))


def _reproducers(job: JobView, catalog: Catalog) -> list[str]:
    """Per failing variant: its pins and the standalone script, once where scripts agree."""
    lines: list[str] = []
    failing = [r for r in job.runs if (r.result or {}).get("status") in FAILING]
    scripts = {r.id: _script(job, r, catalog) for r in failing}
    shown: set[tuple[str, str]] = set()
    for run_view in failing:
        body = scripts[run_view.id].split("\n", 1)[-1]  # the first line names the release
        if (run_view.variant, body) in shown:
            continue  # the same script already shown for another environment
        shown.add((run_view.variant, body))
        same = [r.environment for r in failing if r.variant == run_view.variant
                and scripts[r.id].split("\n", 1)[-1] == body]
        rewrites = known_rewrites((run_view.result or {}).get("rewrites"))
        lines += [f"{code_span(run_view.variant)} on "
                  f"{', '.join(code_span(e) for e in same)} (rewrites: "
                  f"{', '.join(code_span(r) for r in rewrites) or 'none'}):", "",
                  *code_block("\n".join(_pip_line(e, catalog, _with_frontends(job))
                                        for e in same), "sh"), "",
                  "<details><summary>repro.py (the case as a plain script for this release, "
                  "no tvm-repro needed)</summary>",
                  "", *code_block(scripts[run_view.id], "python"), "", "</details>", ""]
    return lines


def _step(comp: Comparison) -> str:
    step = comp.first_differing_pass
    assert step is not None
    return (f"{after_pass(step.index)}: {code_span(step.a)} in {code_span(comp.a.variant)}, "
            f"{code_span(step.b)} in {code_span(comp.b.variant)}")


def _same_part(comp: Comparison) -> tuple[str, str, str]:
    """What two comparisons share when they show the same change (the diff's headers name
    the environment, so they are left out)."""
    body = "\n".join(line for line in comp.diff.splitlines()
                     if not line.startswith(("--- ", "+++ ")))
    return comp.b.variant, _step(comp) if comp.first_differing_pass else "", body


def _comparisons(matrix: Matrix) -> list[str]:
    """Where the variants' IR parts; a diff that is the same in several environments once."""
    seen: dict[tuple[str, str, str], list[str]] = {}
    shown: list[Comparison] = []
    for comp in matrix.comparisons:
        if _same_part(comp) not in seen:
            seen[_same_part(comp)] = []
            shown.append(comp)
        seen[_same_part(comp)].append(comp.a.environment)
    # Said where the numbers are read: each folded section is opened on its own.
    lines = [FROM_ZERO_MARKDOWN, ""] if any(c.first_differing_pass for c in shown) else []
    for comp in shown:
        envs = seen[_same_part(comp)]
        head = (f"{code_span(comp.a.variant)} and {code_span(comp.b.variant)} on "
                f"{', '.join(code_span(e) for e in envs)}")
        if comp.identical or comp.first_differing_pass is None:
            lines += [f"{head}: the IR is the same after every pass.", ""]
            continue
        lines += [f"{head} first differ {_step(comp)}.", "",
                  "<details><summary>diff of the IR after that step</summary>", "",
                  *code_block(comp.diff, "diff"), "", "</details>", ""]
    return lines


def _symbols(job: JobView) -> list[str]:
    """The symbol trace, one line per variant where every environment tells the same story."""
    lines = [FROM_ZERO_MARKDOWN, ""] if any(t.events for t in job.symbols) else []
    for symbol in dict.fromkeys(t.symbol for t in job.symbols):
        lines += [f"{code_span(symbol)}:", ""]
        stories: dict[tuple[str, str], list[str]] = {}
        for trace in (t for t in job.symbols if t.symbol == symbol):
            stories.setdefault((trace.variant, trace.summary()), []).append(trace.environment)
        for (variant, story), envs in stories.items():
            lines.append(f"- {code_span(variant)} ({', '.join(code_span(e) for e in envs)}): "
                         f"{code_span(story)}")
        lines.append("")
    return lines


def _environments(job: JobView, catalog: Catalog) -> list[str]:
    lines = ["| environment | " + " | ".join(PINNED) + " |", "| --- |" + " --- |" * len(PINNED)]
    for env_id in job.environments:
        pins = catalog.get(env_id).packages if env_id in catalog.ids else {}
        lines.append(f"| {table_cell(env_id)} | "
                     + " | ".join(pins.get(p, "?") for p in PINNED) + " |")
    return lines


def _case(case: dict[str, Any]) -> list[str]:
    """The case: its Python as a code block, the rest as JSON."""
    code = case.get("source") or case.get("script") or ""
    rest = {k: v for k, v in case.items() if k not in ("source", "script")}
    return ["<details><summary>The case</summary>", "", *code_block(code, "python"),
            "", *code_block(json.dumps(rest, indent=2), "json"), "", "</details>", ""]


def _signatures(job: JobView, catalog: Catalog) -> list[str]:
    """One line per signature group that failed: where, and the signature."""
    results = _results(job)
    lines = []
    for group in job.matrix.groups:
        first = results[(group.cells[0].variant, group.cells[0].environment)]
        stage = f" at {code_span(first['stage'])}" if first.get("stage") else ""
        releases = ", ".join(dict.fromkeys(_release(c.environment, catalog) for c in group.cells))
        variants = ", ".join(dict.fromkeys(code_span(c.variant) for c in group.cells))
        sig = first.get("signature") or first.get("error_type") or group.status
        lines.append(f"- **{code_span(group.status)}{stage}** ({variants} on {releases}): "
                     f"{code_span(sig)}")
    return lines


def _duplicates(job: JobView) -> list[str]:
    """One line per issue a triage saw fail with a signature of this job's failures."""
    lines = []
    for issue in job.likely_duplicates:
        # A link only to a plain web address: the URL came from an issue export.
        url = issue.url or ""
        number = (f"[#{issue.number}]({url})" if _PLAIN_URL.fullmatch(url)
                  else f"#{issue.number}")
        state = f", {code_span(issue.state.lower())}" if issue.state else ""
        lines.append(f"- **Likely duplicate of {number}** ({code_span(issue.title)}{state}): "
                     f"a triage saw it fail with {code_span(issue.signature)}")
    return lines


def _command(job: JobView, catalog: Catalog) -> list[str]:
    """The reproduce command for the newest failing release (the script is in the details)."""
    failing = [r for r in job.runs if (r.result or {}).get("status") in FAILING]
    if not failing:
        return []
    order = {env_id: i for i, env_id in enumerate(job.environments)}
    newest = max(failing, key=lambda r: order.get(r.environment, -1))
    return [f"- Reproduce without tvm-repro ({code_span(newest.variant)} on "
            f"{_release(newest.environment, catalog)}): "
            f"{code_span(_pip_line(newest.environment, catalog, _with_frontends(job)))}, then "
            f"`python repro.py`{_beside(job)} (the script: *Reproduce without tvm-repro* below)"]


def _beside(job: JobView) -> str:
    """The files the script reads from its directory, said where it is run."""
    if not job.files:
        return ""
    return f" with {', '.join(code_span(f.name) for f in job.files)} beside it (the report's files)"


def _details(summary: str, body: list[str]) -> list[str]:
    """A section a reader opens when needed (GitHub renders Markdown inside it)."""
    return [f"<details><summary>{summary}</summary>", "", *body, "</details>", ""]


def render_report(job: JobView, catalog: Catalog | None = None) -> str:
    """The report of a finished (or unfinished) job, as Markdown: the common part, then the
    kind's section (alone for a kind made of run jobs: their runs are their own reports)."""
    kind = KINDS[job.kind]
    catalog = catalog or default_catalog()
    if kind.parts:
        return "\n".join(kind.report(job, catalog))
    failed = any(c.status in FAILING or c.outputs == "differs"
                 for row in job.matrix.cells for c in row)
    how = "Reproduced with tvm-repro" if failed else "Run with tvm-repro (nothing failed)"
    title = code_span(job.title) if job.title else f"tvm-repro job {code_span(job.id)}"
    top = _signatures(job, catalog) + _duplicates(job) + _command(job, catalog)
    over = over_markdown(job.environments, job.environments_why, job.not_probed)
    lines = [conclusion(job, catalog), "", over, "", *top, *([""] if top else []),
             *_matrix_table(job.matrix), "",
             f"{how}: {title}, job {code_span(job.id)} (status `{job.status.value}`) on "
             f"{len(job.environments)} pinned TVM environment(s).", ""]
    lines += kind.report(job, catalog)
    sections = [("Errors (cells with the same signature grouped)", _errors(job)),
                ("Reproduce without tvm-repro", _reproducers(job, catalog)),
                ("The functions the error names, pass by pass", _symbols(job)),
                ("Where the variants part", _comparisons(job.matrix)),
                ("Environments", _environments(job, catalog) + [""])]
    for summary, body in sections:
        if body:
            lines += _details(summary, body)
    return "\n".join(lines + _case(job.case))
