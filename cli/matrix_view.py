"""A run job as the terminal shows it: the matrix, its signature groups, where variants part."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from cli.output import STATUS_STYLE, layer_lines, plain, shown
from tvmrepro.api.views import JobView
from tvmrepro.choice import over_text
from tvmrepro.escaping import visible_line
from tvmrepro.pass_numbers import FROM_ZERO, after_pass


def matrix_view(job: JobView) -> Group:
    """The matrix (variants x environments), signature groups and where variants part."""
    matrix = job.matrix
    table = Table(title=shown(job.title or f"job {job.id}"),
                  caption=shown(over_text(job.environments, job.environments_why,
                                          job.not_probed)))
    table.add_column("variant")
    for env_id in matrix.environments:
        table.add_column(plain(env_id), overflow="fold")
    for variant, row in zip(matrix.variants, matrix.cells, strict=True):
        cells = []
        for cell in row:
            text = plain(cell.status or cell.state.value, STATUS_STYLE.get(cell.status or "", ""))
            text.append("\n" + visible_line(cell.stage) if cell.stage else "")
            text.append(" (cached)" if cell.cached else "", style="dim")
            if cell.outputs in ("differs", "noise") and cell.output_error is not None:
                error = cell.output_error
                size = f" {error.max_abs_error:.3g}" if error.max_abs_error is not None else ""
                said = (f"outputs differ ({error.reason}{size})" if cell.outputs == "differs"
                        else f"outputs within tolerance (max abs{size})")
                text.append("\n" + visible_line(
                    f"{said} from {error.against.variant}@{error.against.environment}"),
                    style="red" if cell.outputs == "differs" else "dim")
            cells.append(text)
        table.add_row(plain(variant), *cells)
    parts: list[Any] = [table]
    for number, group in enumerate(matrix.groups, 1):
        where = ", ".join(f"{c.variant}@{c.environment}" for c in group.cells)
        parts.append(plain(f"signature {number} ({group.status}, {len(group.cells)} "
                           f"cells: {where}):"))
        parts.append(plain(f"  {group.signature}"))
    for comp in matrix.comparisons:
        step = comp.first_differing_pass
        said = ("identical IR after every pass" if comp.identical or step is None else
                f"IR first differs {after_pass(step.index)} ({step.a} / {step.b})")
        parts.append(plain(f"{comp.a.variant} vs {comp.b.variant} on {comp.a.environment}: "
                           f"{said}"))
    parts += [plain(line) for line in symbol_lines(job)]
    parts += [plain(line) for line in layer_lines([run.result or {} for run in job.runs])]
    if _numbers_passes(job):
        parts.append(plain(f"({FROM_ZERO})", "dim"))
    return Group(*parts)


def symbol_lines(job: JobView) -> list[str]:
    """One line per symbol and variant with the same story in several environments (a story
    told in every environment of the job says so, not their names)."""
    stories: dict[tuple[str, str, str], list[str]] = {}
    for trace in job.symbols:
        stories.setdefault((trace.symbol, trace.variant, trace.summary()), []).append(
            trace.environment)
    lines = []
    for (symbol, variant, story), envs in stories.items():
        where = "every environment" if len(envs) > 1 and set(envs) == set(job.environments) \
            else ", ".join(envs)
        lines.append(f"{symbol} in {variant} on {where}: {story}")
    return lines


def _numbers_passes(job: JobView) -> bool:
    """Whether the matrix view shows a pass's number (a stage, a comparison, a symbol trace)."""
    stages = [cell.stage or "" for row in job.matrix.cells for cell in row]
    return (any(stage.startswith("pass:") for stage in stages) or bool(job.symbols)
            or any(comp.first_differing_pass for comp in job.matrix.comparisons))
