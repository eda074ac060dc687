"""`tvmrepro new`: a case from a .py file that defines a module, so nobody escapes TVMScript by hand."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, TypedDict

import click

from cli.output import reports_errors
from tvmrepro.cases import check_pass_names, parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.settings import Settings


def module_names(source: str) -> list[str]:
    """Names of the classes decorated with `@I.ir_module` (or `@ir_module`) at the top level."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name == "ir_module":
                    found.append(node.name)
    return found


class VariantJson(TypedDict):
    """A variant as a case file holds it: its name and its passes' names."""

    name: str
    passes: list[str]


def parse_variant(text: str, index: int) -> VariantJson:
    """'NAME=PassA,PassB' (or just 'PassA,PassB', named vN) as a variant."""
    name, sep, passes = text.partition("=")
    if not sep:
        name, passes = f"v{index + 1}", text
    names = [p.strip() for p in passes.split(",") if p.strip()]
    if not names:
        raise BadInput(f"--variant[{index}]", f"{text!r} names no pass (NAME=PassA,PassB)")
    return {"name": name.strip(), "passes": names}


def provisioned_passes(settings: Settings) -> set[str]:
    """Every pass name that some environment provisioned in this home has (empty: none is)."""
    from worker.environments.provision import read_fingerprint

    known: set[str] = set()
    for environment in default_catalog().environments:
        fingerprint = read_fingerprint(settings, environment) or {}
        known.update(fingerprint.get("passes") or ())
    return known


def new_case(path: Path, variants: list[str], module: str | None, known_passes: set[str],
             **fields: Any) -> dict[str, Any]:
    """The case JSON for the module in `path` with these variants; BadInput names what is wrong.

    A pass that no environment in `known_passes`'s home has is refused with the nearest one
    (no check when nothing is provisioned: there is nothing to check against)."""
    try:
        source = path.read_text()
    except OSError as exc:
        raise BadInput(str(path), f"cannot read: {exc.strerror}") from exc
    try:
        modules = module_names(source)
    except SyntaxError as exc:
        raise BadInput(str(path), f"not valid Python: {exc.msg} at line {exc.lineno}") from exc
    if module is None:
        if len(modules) != 1:
            raise BadInput("--module", f"{path} defines {len(modules)} @I.ir_module classes "
                                       f"({', '.join(modules) or 'none'}); name one")
        module = modules[0]
    elif module not in modules:
        raise BadInput("--module", f"{path} has no @I.ir_module class {module!r} "
                                   f"(it has: {', '.join(modules) or 'none'})")
    if not variants:
        raise BadInput("--variant", "give at least one pass sequence, e.g. once=FuseTIR,LambdaLift")
    case = {"title": path.name, "source": source, "module": module,
            "variants": [parse_variant(v, i) for i, v in enumerate(variants)],
            **{k: v for k, v in fields.items() if v is not None}}
    check_pass_names(parse_case(case), known_passes)  # the same validation a submission gets
    return case


@click.command("new")
@click.argument("module_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--variant", "variants", multiple=True, metavar="NAME=PASS,PASS",
              help="A named pass sequence (repeatable), e.g. once=FuseTIR,LambdaLift.")
@click.option("--module", default=None, help="The @I.ir_module class (default: the only one).")
@click.option("--target", default=None, help="Build target (default: the environment's).")
@click.option("--entry", default=None, help="Function to call in the VM (default: none).")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the case here (default: standard output).")
@reports_errors
def new_command(module_file: Path, variants: tuple[str, ...], module: str | None,
                target: str | None, entry: str | None, output: Path | None) -> None:
    """Make a case (JSON) from a .py file that defines an IRModule, with named pass sequences."""
    case = new_case(module_file, list(variants), module, provisioned_passes(Settings.from_env()),
                    target=target, entry=entry)
    text = json.dumps(case, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"{output}: {len(case['variants'])} variants of {case['module']}", err=True)
