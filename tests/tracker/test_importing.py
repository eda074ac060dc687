"""`tvmrepro import` over the corpus of real apache/tvm issue bodies (no TVM needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.cli import main
from cli.commands.tracker import read_reports
from tests.conftest import case_path
from tvmrepro.errors import BadInput
from tvmrepro.jobs.tracker.importing import ImportedReport, import_body, import_export, import_file

CORPUS = Path(__file__).parent / "corpus" / "issues.json"

# The reports whose body has no runnable script, and why (the reason's start).
NO_CODE = {
    16774: "the body has no code block",  # its stored text holds no description at all
    15108: "the body has no code block",  # "python build.py" in prose
    # onnx, onnxruntime and torch are pinned (the frontend flavours); these need more.
    15722: "the script needs what the body does not hold: file Add.onnx",
    14437: "the script needs what the body does not hold: package torchvision",
    17876: "the script needs what the body does not hold: file a240.onnx, file inputs.pkl",
    10324: "no block is a Python script (blocks: bash, c++;",  # a C++ fix and a gdb session
    17254: "no block is a Python script (blocks: untagged;",  # a traceback only
    17744: "no block is a Python script (blocks: c;",
    17964: "no block is a Python script (blocks: c;",
    17210: "no block is a Python script (blocks: untagged;",
    17223: "no block is a Python script (blocks: untagged;",
    18824: "no block is a Python script (blocks: untagged;",  # cut short inside the script
}
# The error each report quotes (type, start of the line), from its body or else its title.
QUOTED = {
    17239: ("crash", "Segmentation fault (core dumped)"),
    17370: ("crash", "Segmentation fault (core dumped)"),
    17348: ("crash", "Segmentation fault (core dumped)"),
    17357: ("InternalError", "InternalError: Check failed: (func.defined()) is false: Error: "
                             "Cannot find PackedFunc fused_relax_nn_attention_cutlass_gv"),
    17406: ("TVMError", "TVMError: Argument 0 type mismatch: expected R.Tensor((2, 3), "
                        "dtype=\"float32\"), given R.Object"),
    20192: ("InternalError", "InternalError: CodeGenVM cannot emit this Relax operator directly"),
    20200: ("InternalError", "InternalError: Check failed: (tir_call->op.same_as("),
    15722: ("TVMError", "TVMError: CodeGenVM cannot handle this intrinsic now: Op(relax.add)"),
    14437: ("TVMError", "TVMError: CodeGenVM cannot handle this intrinsic now:"),
    17876: ("InternalError", "InternalError: Check failed: (slot->value_computed) is false"),
    10324: ("crash", "Thread 1 \"python\" received signal SIGSEGV, Segmentation fault."),
    20191: ("crash", "official target-default: native segfault"),
    17744: ("InternalError", "InternalError: Check failed: value <= support::kMaxFloat16"),
    17964: ("AssertionError", "AssertionError: emit_te now only supports Tensor"),
    17210: ("InternalError", "InternalError: Check failed: (it_group != obj2group_.end()) is false"),
}
VERSIONS = {20195: "0.26.dev1", 20200: "0.26.0", 15722: "0.14.dev0", 18824: "0.23.0"}


@pytest.fixture(scope="module")
def corpus() -> dict[int | None, ImportedReport]:
    return {report.number: report for report in import_file(CORPUS)}


def test_corpus_is_a_gh_export_of_real_issues() -> None:
    issues = json.loads(CORPUS.read_text())
    assert len(issues) >= 20
    for issue in issues:
        assert set(issue) == {"number", "title", "state", "body", "url"}
        assert issue["url"] == f"https://github.com/apache/tvm/issues/{issue['number']}"
    assert {issue["state"] for issue in issues} == {"OPEN", "CLOSED"}


def test_exactly_these_reports_have_no_code(corpus: dict[int | None, ImportedReport]) -> None:
    no_code = {n: r.no_code for n, r in corpus.items() if r.no_code is not None}
    assert set(no_code) == set(NO_CODE)
    for number, start in NO_CODE.items():
        assert no_code[number].startswith(start), number
        assert corpus[number].script is None


def test_quoted_errors_and_versions(corpus: dict[int | None, ImportedReport]) -> None:
    quoted = {n: (r.quoted_error_type, r.quoted_error) for n, r in corpus.items()
              if r.quoted_error is not None}
    assert set(quoted) == set(QUOTED)
    for number, (error_type, start) in QUOTED.items():
        assert quoted[number][0] == error_type, number
        assert quoted[number][1].startswith(start), number
    versions = {n: r.tvm_version for n, r in corpus.items() if r.tvm_version}
    assert versions == VERSIONS


def test_a_script_is_the_code_block_not_the_traceback(corpus: dict[int | None, ImportedReport]) -> None:
    script = corpus[17406].script or ""
    assert script.startswith("import tvm\nfrom tvm import relax\n")
    assert "Traceback" not in script and "TVMError" not in script
    assert script.rstrip().endswith('vm = relax.VirtualMachine(ex, tvm.cpu())')
    # An untagged block is code when it parses as Python (#17239's script has no tag).
    assert (corpus[17239].script or "").startswith("from tvm.script import ir as I\n")


MULTI_BLOCK = """### Actual behavior

```
Traceback (most recent call last):
  File "repro.py", line 12, in <module>
tvm.error.InternalError: Check failed: (a == b) is false: mismatch
```

### Steps to reproduce

The module:

```python
import tvm
from tvm import relax
from tvm.script import relax as R

@I.ir_module
class Module:
    pass
```

then the passes:

```python
mod = relax.transform.LegalizeOps()(Module)
```

and again, as above:

```python
mod = relax.transform.LegalizeOps()(Module)
```

```shell
$ python repro.py
Segmentation fault (core dumped)
```
"""


def test_several_blocks_are_joined_in_order_once_each() -> None:
    report = import_body(MULTI_BLOCK, 1, "joined")
    assert report.script == ("import tvm\nfrom tvm import relax\nfrom tvm.script import relax as R"
                             "\n\n@I.ir_module\nclass Module:\n    pass\n\n"
                             "mod = relax.transform.LegalizeOps()(Module)\n")
    # The first quoted output that ends with an error is the report's quoted error.
    assert report.quoted_error == "InternalError: Check failed: (a == b) is false: mismatch"


@pytest.mark.parametrize("data, field", [
    ({"number": 1}, "issues"),
    ([{"number": 1, "title": "t"}], "[0].body"),
    ([{"number": "1", "body": ""}], "[0].number"),
    ([{"number": 1, "body": ""}, {"number": 1, "body": ""}], "issues"),
    (["text"], "[0]"),
    ([{"number": 1, "body": "", "state": "x" * 500}], "[0].state"),
])
def test_bad_exports_name_what_is_wrong(data: object, field: str) -> None:
    with pytest.raises(BadInput) as caught:
        import_export(data)
    assert caught.value.field == field


def test_the_command_exits_2_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "issues.json"
    bad.write_text("{not json")
    wrong = tmp_path / "issues.yaml"
    wrong.write_text("")
    for path, words in ((bad, "not JSON"), (wrong, "expected an issue export"),
                        (tmp_path / "absent.json", "cannot read")):
        ran = CliRunner().invoke(main, ["import", str(path)])
        assert ran.exit_code == 2, ran.output
        assert str(path) in ran.stderr and words in ran.stderr


def test_import_writes_cases_that_run_takes(tmp_path: Path) -> None:
    ran = CliRunner().invoke(main, ["import", str(CORPUS), "-o", str(tmp_path), "--json"])
    assert ran.exit_code == 0, ran.stderr
    printed = json.loads(ran.stdout)["reports"]
    with_code = sorted(r["number"] for r in printed if r["script"] is not None)
    assert sorted(int(p.stem) for p in tmp_path.glob("*.py")) == with_code
    assert len(with_code) == len(printed) - len(NO_CODE)
    from tvmrepro.cases import load_case_file

    case = load_case_file(tmp_path / "20200.py")
    assert case.script == (tmp_path / "20200.py").read_text()
    assert json.loads((tmp_path / "reports.json").read_text())["reports"] == printed


def test_module_mode_where_the_script_is_a_module_passes_and_a_build(
        corpus: dict[int | None, ImportedReport]) -> None:
    with_module = {n: r.module_case for n, r in corpus.items() if r.module_case is not None}
    assert set(with_module) == {17357, 17406}
    # #17357's script is the founding case's first variant: its module, passes and opt_level.
    founding = json.loads(case_path("tvm-17357/case.json").read_text())
    case = with_module[17357]
    assert case["variants"][0]["passes"] == [{"name": p} for p in founding["variants"][0]["passes"]]
    assert (case["module"], case["opt_level"], case["target"]) == ("Module", 4, "llvm")
    # The source stops at the module's end: the passes and the build are the case's own.
    assert case["source"].rstrip().endswith("= gv(q, k, v)\n        return gv1")
    assert "relax.build" not in case["source"] and "Sequential" not in case["source"]
    assert with_module[17406]["variants"] == [{"name": "report", "passes": [{"name": "LambdaLift"}]}]
    # #20195 applies its passes in a loop and #17348 calls the VM with inputs of its own: scripts.
    assert corpus[20195].module_case is None and corpus[17348].module_case is None


def test_one_issue_in_markdown_takes_its_number_from_the_file_name(tmp_path: Path) -> None:
    issue = tmp_path / "17406.md"
    issue.write_text(json.loads(CORPUS.read_text())[4]["body"])
    (report,) = import_file(issue)
    assert (report.number, report.quoted_error_type) == (17406, "TVMError")
    assert report.script is not None and report.module_case is not None


def test_triage_reads_the_directory_an_import_wrote(tmp_path: Path) -> None:
    assert CliRunner().invoke(main, ["import", str(CORPUS), "-o", str(tmp_path)]).exit_code == 0
    assert read_reports(tmp_path) == import_file(CORPUS)
    assert json.loads((tmp_path / "17357.json").read_text())["opt_level"] == 4
    ran = CliRunner().invoke(main, ["triage", str(tmp_path / "absent")])
    assert ran.exit_code == 2 and "absent: cannot read" in ran.stderr
    ran = CliRunner().invoke(main, ["triage", str(tmp_path.parent), "--local"])
    assert ran.exit_code == 2 and "reports.json" in ran.stderr


def test_a_block_under_an_output_heading_is_output() -> None:
    printed = "@I.ir_module\nclass Module:\n    pass"
    body = (f"### Steps to reproduce the error\n\n```\nimport tvm\n```\n\n"
            f"### Output\n\n```\n{printed}\n```\n")
    assert import_body(body).script == "import tvm\n"
    assert import_body(body.replace("```\n@I", "```python\n@I")).script == "import tvm\n"
    assert import_body(body.replace("### Output", "### Then")).script == f"import tvm\n\n{printed}\n"
