"""A bisect job's section of the Markdown report: what was asked, what each release did, where
it changed, what ran, and the command that does it again."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

from tvmrepro.api.views import Bisection, BisectTransition, RunView
from tvmrepro.environments import Catalog, default_catalog
from tvmrepro.escaping import code_block, code_span, table_cell

CASE_FILE = "case.json"
MAX_SIGNATURE_CHARS = 160
TOP_SUSPECTS = 3

_SAID = {
    "changed": "changed once: **{last}** → **{first}**",
    "unchanged": "the same on every probed release",
    "non_monotonic": "changed more than once (the bug came and went): see every transition below",
    "inconclusive": "not decided: skipped, flaky or unprobed releases hide where it changed",
}


def _cell(text: str | None) -> str:
    """Table cell text: one line in code, capped."""
    text = text or ""
    if not text:
        return ""
    return table_cell(text[:MAX_SIGNATURE_CHARS]) + ("…" if len(text) > MAX_SIGNATURE_CHARS else "")


def reproduce_command(bisect: Bisection) -> str:
    """`tvmrepro bisect ...` with this bisection's options (the case saved as case.json)."""
    words = ["tvmrepro", "bisect", CASE_FILE, "--variant", bisect.variant]
    for env_id in bisect.environments:
        words += ["--env", env_id]
    words += ["--oracle", bisect.oracle]
    if bisect.reference and bisect.oracle in ("signature", "output"):
        words += ["--reference", bisect.reference]
    words += ["--repeat", str(bisect.repeat), "--strategy", bisect.strategy]
    return " ".join(shlex.quote(word) for word in words)


def _probes(bisect: Bisection) -> list[str]:
    lines = ["| environment | verdict | status | stage | signature |",
             "| --- | --- | --- | --- | --- |"]
    for probe in bisect.probes:
        statuses = probe.statuses or [probe.status]
        lines.append(f"| {table_cell(probe.environment)} | **{table_cell(probe.verdict)}** | "
                     f"{', '.join(table_cell(s) for s in statuses)} | "
                     f"{_cell(probe.stage)} | {_cell(probe.signature)} |")
    broken = [p for p in bisect.probes if p.environment_defect]
    if broken:
        lines += ["", "Skipped as broken environments (their wheel fails its canary so, "
                  "whatever the report): " + "; ".join(
                      f"{code_span(p.environment)}: {code_span(p.environment_defect or '')}"
                      for p in broken)]
    return lines


def _transitions(bisect: Bisection) -> list[str]:
    if not bisect.transitions:
        return ["No transition: every decided probe gave the same verdict.", ""]
    lines = []
    for change in bisect.transitions:
        line = (f"- {code_span(change.before)} ({code_span(change.from_)}) → "
                f"{code_span(change.after)} ({code_span(change.to)})")
        if change.candidates:
            line += ("; the change may lie in any of the candidates "
                     + ", ".join(code_span(c) for c in change.candidates))
        if change.not_in_range:
            line += ("; not probed (outside the range), the change may lie there too: "
                     + ", ".join(code_span(c) for c in change.not_in_range))
        lines.append(line)
        lines += _window(change)
    return lines + [""]


def _window(change: BisectTransition) -> list[str]:
    """A transition's commit window, its compare link and its three best suspects (the
    subjects and reasons are text: in code spans)."""
    span = change.window
    if not span:
        return []
    picked = (f" ({span.picked} of them already in {code_span(change.before)} as "
              "cherry-picks)" if span.picked else "")
    link = f": [compare on GitHub]({span.compare_url})" if span.compare_url else ""
    lines = [f"  - Commit window: {span.commits} commits from "
             f"{code_span((span.from_commit or '?')[:10])} to "
             f"{code_span((span.to_commit or '?')[:10])}{picked}{link}."]
    if span.history:  # which history, and how fresh: a window is only as new as its history
        newest = f", newest commit {code_span(span.history_newest[:10])}" \
            if span.history_newest else ""
        lines.append(f"  - History: {code_span(span.history)}{newest}.")
    if span.open_ended:
        lines.append(f"  - Open-ended: {code_span(span.missing or '')}.")
    suspects = (change.suspects or [])[:TOP_SUSPECTS]
    if not suspects:
        lines.append("  - No commit of the window shows the evidence.")
    for n, suspect in enumerate(suspects, 1):
        name = f"#{int(suspect.pr)}" if suspect.pr else suspect.sha[:10]
        lines.append(f"  - Suspect {n} (score {suspect.score:.2f}): [{name}]({suspect.url}) "
                     f"{code_span(suspect.subject)}: "
                     + "; ".join(code_span(r) for r in suspect.reasons[:4]))
    return lines


def _fingerprints(runs: list[RunView], bisect: Bisection, catalog: Catalog) -> list[str]:
    seen = {r.environment: (r.result or {}).get("tvm") or {} for r in runs}
    known = set(catalog.ids)
    lines = ["| environment | TVM (as run) | apache-tvm-ffi | numpy | libinfo |",
             "| --- | --- | --- | --- | --- |"]
    for env_id in bisect.environments:
        if env_id not in seen:
            continue
        pins = catalog.get(env_id).packages if env_id in known else {}
        facts = seen[env_id]
        flags = sorted(k for k, v in (facts.get("libinfo") or {}).items() if v == "ON")
        lines.append(f"| {table_cell(env_id)} | {table_cell(facts.get('version', '?'))} | "
                     f"{pins.get('apache-tvm-ffi', '?')} | {pins.get('numpy', '?')} | "
                     f"{', '.join(table_cell(f) for f in flags)} |")
    return lines


def render_bisect(bisect: Bisection | None, runs: list[RunView], case: Mapping[str, object],
                  catalog: Catalog | None = None) -> list[str]:
    """The bisect section of a job's report, from its bisect object, its runs and its case
    (no lines for a job that is not a bisection)."""
    if bisect is None:
        return []
    catalog = catalog or default_catalog()
    envs = bisect.environments
    said = _SAID.get(bisect.verdict, "{first}").format(
        last=code_span(bisect.last_before_change), first=code_span(bisect.first_changed))
    reference = f", reference {code_span(bisect.reference)}" if bisect.reference else ""
    lines = ["#### Bisection", "",
             f"Variant {code_span(bisect.variant)}, oracle {code_span(bisect.oracle)}"
             f"{reference}, over {len(envs)} environments from {code_span(envs[0])} to "
             f"{code_span(envs[-1])} (strategy {code_span(bisect.strategy)}, "
             f"{bisect.repeat} run(s) per probe, {bisect.progress.done} of "
             f"{bisect.progress.total} probes done).", "",
             f"Verdict: **{code_span(bisect.verdict)}**: {said}.", ""]
    if bisect.oracle_error:  # the oracle judged nothing: say why before the probes
        lines += [f"The oracle judged no run: {code_span(bisect.oracle_error)}.", ""]
    lines += _probes(bisect) + ["", "Transitions:", ""] + _transitions(bisect)
    lines += ["Environments as they ran:", ""] + _fingerprints(runs, bisect, catalog) + [""]
    lines += ["To reproduce, save the case below as `case.json` and run:", "",
              *code_block(reproduce_command(bisect), "sh"), "",
              f"<details><summary>{CASE_FILE}</summary>", "",
              *code_block(json.dumps(case, indent=2), "json"), "", "</details>",
              ""]
    return lines
