"""The symbol trace: follow a global function that an error names through each run's passes.

An error such as "Cannot find ffi::Function fused_relax_nn_attention_cutlass_gv"
names a global function that some pass created, renamed or removed. Every run
records the function table after each pass (name and kind), so the story of
that name can be read off the tables: after which pass it first appears, when it
changes kind (a Relax function that became a PrimFunc), when it is renamed (it
disappears and a name of the same stem with another numeric suffix appears,
e.g. `..._gv` -> `..._gv1`, as IRModule name deduplication does) and when it is
removed. Tables name functions of the module, so a name that no table holds
is not traced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tvmrepro.api.traced import SymbolEvent, SymbolTrace

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Traces are made once per job, when its last run is stored, and kept with it: at most this
# many symbols (the first that errors name), each traced in every run.
MAX_SYMBOLS = 8
_SUFFIX = re.compile(r"\d+$")
_DEFINED = re.compile(r"^\s*def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.M)

Table = dict[str, str]  # function name -> kind, after one pass


def tables(passes: Iterable[dict[str, Any]]) -> list[tuple[str, Table]]:
    """(pass name, {function: kind}) after each pass of a result's `passes`."""
    return [(p["name"], {f["name"]: f.get("kind", "") for f in p.get("functions") or []})
            for p in passes]


def named_symbols(message: str, known: set[str]) -> list[str]:
    """The global functions an error message names: identifiers that some pass table holds."""
    return list(dict.fromkeys(w for w in _IDENTIFIER.findall(message or "") if w in known))


def _renamed(name: str, before: Table, after: Table) -> str | None:
    """The new name of `name` when it vanished and one name of the same stem appeared."""
    stem = _SUFFIX.sub("", name)
    fresh = [n for n in after if n not in before and _SUFFIX.sub("", n) == stem]
    return fresh[0] if len(fresh) == 1 else None


def defined_in(source: str) -> set[str]:
    """The functions a case's source defines (`def name(`): the module before any pass."""
    return set(_DEFINED.findall(source or ""))


def trace(symbol: str, steps: list[tuple[str, Table]],
          given: set[str] | frozenset[str] = frozenset()) -> tuple[list[SymbolEvent], str | None]:
    """The events of `symbol` over the pass tables, and its name after the last one.

    `given`: the functions of the module before the first pass (a symbol among them that the
    first table holds was there from the start, not made by the first pass)."""
    events: list[SymbolEvent] = []
    current: str | None = None
    previous: Table = {}
    if steps and symbol in given and symbol in steps[0][1]:
        current, previous = symbol, {symbol: steps[0][1][symbol]}
    for step, (pass_name, table) in enumerate(steps, start=1):
        if current is None:
            if symbol in table and symbol not in previous:
                current = symbol
                events.append(SymbolEvent(step=step, pass_name=pass_name, event="appeared",
                                          name=symbol, kind=table[symbol]))
        elif current not in table:
            new = _renamed(current, previous, table)
            events.append(SymbolEvent(step=step, pass_name=pass_name,
                                      event="renamed" if new else "removed", name=new or current,
                                      kind=table.get(new or ""), previous=current if new else None))
            current = new
        elif table[current] != previous.get(current):
            events.append(SymbolEvent(step=step, pass_name=pass_name, event="kind_changed",
                                      name=current, kind=table[current], previous=previous[current]))
        previous = table
    return events, current


def symbol_traces(runs: list[dict[str, Any]], source: str = "") -> list[SymbolTrace]:
    """Traces of every symbol that an error of these runs names, in every run of the job.

    Each run is a dict with `variant`, `environment`, `message` and `passes` (the
    result's per-pass function tables). The symbols come from the failing runs'
    messages; they are traced in every run, so that a variant that works shows
    what it did differently. `source` is the case's (script or module): what it defines was
    there before the first pass.
    """
    given = defined_in(source)
    run_tables = [(run, tables(run.get("passes") or [])) for run in runs]
    known = {name for _, steps in run_tables for _, table in steps for name in table}
    symbols: list[str] = []
    for run, _ in run_tables:
        for name in named_symbols(run.get("message") or "", known):
            if name not in symbols and len(symbols) < MAX_SYMBOLS:
                symbols.append(name)
    traces = []
    for symbol in symbols:
        for run, steps in run_tables:
            events, final = trace(symbol, steps, given)
            traces.append(SymbolTrace(symbol=symbol, variant=run["variant"],
                                      environment=run["environment"], events=events,
                                      final_name=final))
    return traces
