"""Case validation: every bad case names the field that is wrong, and says what is wrong with it."""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tvmrepro.cases import check_pass_names, load_case_file, parse_case, parse_python
from tvmrepro.errors import BadInput

MODULE = "from tvm.script import ir as I\n@I.ir_module\nclass Module:\n    pass\n"
GOOD: dict[str, Any] = {"source": MODULE, "variants": [{"name": "a", "passes": ["FuseTIR"]}]}


@pytest.mark.parametrize(("change", "field", "problem"), [
    ({"timeout_s": 0}, "timeout_s", "greater than or equal to 1"),
    ({"timeout_s": 10 ** 6}, "timeout_s", "less than or equal to"),
    ({"memory_mb": 1}, "memory_mb", "greater than or equal to 256"),
    ({"variants": [{"name": "a", "passes": []}, {"name": "a", "passes": []}]}, "case",
     "variant names must be unique"),
    ({"script": "print(1)"}, "case", "either 'script' or 'source'"),
    ({"variants": [{"name": "a", "passes": ["Fuse TIR"]}]}, "variants[0].passes[0].name",
     "is not a pass name"),
    ({"source": "@I.ir_module\nclass Module:\n    def f(self:\n"}, "source",
     "not valid Python: '(' was never closed at line 3, column 10"),
    ({"unknown": 1}, "unknown", "Extra inputs are not permitted"),
    ({"reference": "np.sum(x)"}, "case", "a 'reference' needs an 'entry'"),
    ({"reference": "np.sum(x", "entry": "main"}, "reference",
     "not a Python expression: '(' was never closed"),
])
def test_a_bad_case_names_its_field(change: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_case({**GOOD, **change})
    assert info.value.field == field
    assert problem in info.value.problem


def test_a_script_that_is_not_python_names_line_and_column(tmp_path: Path) -> None:
    script = tmp_path / "repro.py"
    script.write_text("import tvm\nif True\n    pass\n")
    with pytest.raises(BadInput) as info:
        load_case_file(script)
    assert (info.value.field, info.value.problem) == (
        "script", "not valid Python: expected ':' at line 2, column 8")


def test_a_nul_byte_is_named_without_a_location() -> None:
    with pytest.raises(BadInput) as info:
        parse_case({"script": "a = 1\x00"})
    assert info.value.field == "script"
    assert info.value.problem.startswith("not valid Python: source code string cannot contain null")


def test_a_good_case_passes() -> None:
    assert parse_case(GOOD).variant_names == ["a"]


def test_an_unknown_pass_gets_the_nearest_known_one() -> None:
    case = parse_case({**GOOD, "variants": [{"name": "a", "passes": ["LegalizeOp", "FuseTir"]}]})
    known = {"LegalizeOps", "FuseTIR", "FuseOps"}
    with pytest.raises(BadInput) as info:
        check_pass_names(case, known)
    assert info.value.field == "variants[0].passes[0]"
    assert info.value.problem.endswith("; did you mean LegalizeOps?")
    second = parse_case({**GOOD, "variants": [{"name": "a", "passes": ["FuseTir"]}]})
    with pytest.raises(BadInput, match="did you mean FuseTIR"):
        check_pass_names(second, known)


class _Finalized:
    """Garbage whose collection runs Python code: a thread switch inside another's parse."""

    def __del__(self) -> None:
        sum(range(50))


def test_parses_in_many_threads_at_once_all_succeed() -> None:
    """CPython 3.11's AST constructor shares its recursion depth between threads: parsing in
    several at once, with collections running finalizers, failed one of them with "AST
    constructor recursion depth mismatch" (a 500 for one of 20 submissions at once)."""
    failures: list[BaseException] = []

    def parse(k: int) -> None:
        for i in range(200):
            source = f"x{k}_{i} = " + "(" * 60 + "1" + ")" * 60 + "\ndef f():\n    return [[1]]\n" * 20
            try:
                parse_python(source)
            except SystemError as exc:
                failures.append(exc)
                return

    def churn() -> None:
        for _ in range(100_000):
            a, b = _Finalized(), _Finalized()
            a.other, b.other = b, a  # type: ignore[attr-defined]  # a cycle: the collector's

    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50)
    try:
        threads = [threading.Thread(target=parse, args=(k,)) for k in range(6)]
        threads.append(threading.Thread(target=churn))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)
    assert failures == []
