"""Text edits of a printed module: functions, statements, bindings' values, shapes (no TVM)."""

from __future__ import annotations

from worker.narrowing import candidates

MODULE = '''from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor((4, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        y: R.Tensor((4, 8), dtype="float32") = R.add(x, x)
        return y

    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        cls = Module
        with R.dataflow():
            a: R.Tensor((4, 8), dtype="float32") = cls.helper(x)
            b = R.call_tir(cls.helper, (a,), out_ty=R.Tensor((4, 8), dtype="float32"))
            R.output(b)
        return b
'''


def test_function_spans_cover_decorator_def_and_body() -> None:
    lines = MODULE.splitlines()
    spans = candidates.function_spans(lines)
    assert [name for name, _start, _end in spans] == ["helper", "main"]
    _name, start, end = spans[0]
    assert lines[start].strip() == "@R.function"
    assert lines[end - 1].strip() == "return y"


def test_drop_functions_removes_each_one_whole() -> None:
    found = candidates.drop_functions(MODULE)
    assert [c.what for c in found] == ["drop function helper", "drop function main"]
    assert "def helper" not in found[0].source and "def main" in found[0].source
    assert "return y" not in found[0].source


def test_statements_come_in_runs_then_one_by_one() -> None:
    found = candidates.drop_statements(MODULE, 8)
    sources = [c.source for c in found]
    # `main` has three statements at depth 8: cls, the dataflow block (with its body), return.
    assert any("with R.dataflow()" not in s and "cls = Module" in s for s in sources)
    assert all(s.count("class Module") == 1 for s in sources)
    deeper = candidates.drop_statements(MODULE, 12)
    assert any("a: R.Tensor" not in c.source and "R.output(b)" in c.source for c in deeper)


def test_zero_bindings_keep_the_type_and_replace_the_value() -> None:
    found = {c.what.split(" (")[0]: c.source for c in candidates.zero_bindings(MODULE)}
    assert set(found) == {"zeros for y", "zeros for a", "zeros for b"}
    assert ('b: R.Tensor((4, 8), dtype="float32") = R.zeros(R.shape([4, 8]), dtype="float32")'
            in found["zeros for b"])
    assert "R.call_tir" not in found["zeros for b"]


def test_shrink_shapes_changes_one_extent_everywhere() -> None:
    found = candidates.shrink_shapes(MODULE)
    assert [c.what for c in found] == ["shape extent 8 -> 1", "shape extent 8 -> 4",
                                       "shape extent 4 -> 1", "shape extent 4 -> 2"]
    assert "(4, 8)" not in found[0].source
    assert found[0].source.count("(4, 1)") == MODULE.count("(4, 8)")
    assert "R.shape([" not in found[0].source


def test_max_depth_is_the_deepest_statement() -> None:
    assert candidates.max_depth(MODULE) == 12


SYMBOLIC = '''@I.ir_module
class Module:
    @T.prim_func(private=True)
    def copy(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, T.int64(8)))
        B = T.match_buffer(b, (n, T.int64(8)))
        for i, j in T.grid(n, T.int64(8)):
            B[i, j] = A[i, j]

    @R.function
    def main(x: R.Tensor(("n", 8), dtype="float32"), s: R.Shape(["m"])):
        n = T.int64()
        m = T.int64()
        y = R.call_tir(Module.copy, (x,), out_ty=R.Tensor((n, 8), dtype="float32"))
        return y
'''


def test_concretize_shape_vars_makes_each_one_a_constant_everywhere() -> None:
    found = candidates.concretize_shape_vars(SYMBOLIC)
    assert [c.what for c in found] == ["shape variable n -> 1", "shape variable m -> 1"]
    n_gone = found[0].source
    assert "n = T.int64()" not in n_gone and "m = T.int64()" in n_gone
    assert 'x: R.Tensor((1, 8), dtype="float32")' in n_gone
    assert "T.match_buffer(a, (1, T.int64(8)))" in n_gone
    assert "T.grid(1, T.int64(8))" in n_gone and "R.Tensor((1, 8)" in n_gone
    assert "R.Shape([1])" in found[1].source and 'R.Shape(["m"])' in n_gone


PRIM = '''from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Module:
    @T.prim_func
    def copy(a: T.handle, b: T.Buffer((16,), "float32")):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        A = T.match_buffer(a, (n,))
        for i in range(16):
            b[i] = A[i]

    @T.prim_func
    def done(b: T.Buffer((16,), "float32")):
        T.evaluate(0)

    @R.function
    def main(x: R.Tensor((16,), dtype="float32")) -> R.Tensor((16,), dtype="float32"):
        return x
'''


def test_empty_prim_funcs_keep_what_binds_the_signature() -> None:
    found = candidates.empty_prim_funcs(PRIM)
    # `done` is empty already, and main is no PrimFunc: one edit.
    assert [c.what for c in found] == ["empty body of copy"]
    copy = found[0].source.split("    @T.prim_func\n")[1]
    assert copy == '''    def copy(a: T.handle, b: T.Buffer((16,), "float32")):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        A = T.match_buffer(a, (n,))
        T.evaluate(0)

'''
    assert candidates.empty_prim_funcs(found[0].source) == []


def test_shrink_shapes_takes_a_prim_funcs_loop_extent_along() -> None:
    edit = next(c for c in candidates.shrink_shapes(PRIM) if c.what == "shape extent 16 -> 1")
    assert "for i in range(1):" in edit.source and 'b: T.Buffer((1,), "float32")' in edit.source
