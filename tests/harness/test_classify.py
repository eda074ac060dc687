"""Classification and signatures: one bug reads the same on every TVM version (no TVM needed)."""

from __future__ import annotations

import sys

from images import IMAGES_DIR

sys.path.insert(0, str(IMAGES_DIR))
from harness.classify import classify, first_line, signature  # noqa: E402
from harness.porting import Incompatible  # noqa: E402

MSG_2024 = ("Check failed: (func.defined()) is false: Error: Cannot find PackedFunc "
            "fused_relax_nn_attention_cutlass_gv in either Relax VM kernel library, or in TVM "
            "runtime PackedFunc registry, or in global Relax functions of the VM executable")
MSG_2026 = ("Check failed: (func.has_value()) is false: Error: Cannot find ffi::Function "
            "fused_relax_nn_attention_cutlass_gv in either Relax VM kernel library, or in TVM "
            "runtime ffi::Function registry, or in global Relax functions of the VM executable")


def test_packedfunc_and_ffi_function_read_the_same() -> None:
    old = signature("InternalError", MSG_2024.replace("func.defined()", "func.has_value()"))
    assert old == signature("InternalError", MSG_2026)
    assert "fused_relax_nn_attention_cutlass_gv" in old


def test_struct_info_and_type_wording_read_the_same() -> None:
    a = signature("TVMError", "Expected TensorStructInfo, but got relax.expr.Var at 0x7f3a2c")
    b = signature("TVMError", "Expected TensorType, but got ir.Var at 0x55d1e0")
    assert a == b == "TVMError: Expected TensorType, but got Var at 0x?"


def test_paths_and_line_numbers_are_dropped() -> None:
    a = signature("ValueError", "bad shape in /home/a/tvm/src/relax/op.cc:120 at line 7")
    b = signature("ValueError", "bad shape in /opt/tvm/src/relax/op.cc:98 at line 12")
    assert a == b


def test_first_line_skips_backtrace_frames() -> None:
    text = "Traceback (most recent call last):\n  File \"x.py\", line 1\n  0: foo\nReal error\nmore"
    assert first_line(text) == "Real error"


def test_statuses() -> None:
    assert classify(MemoryError("Unable to allocate 64.0 GiB")).status == "oom"
    assert classify(RuntimeError("std::bad_alloc")).status == "oom"
    assert classify(Incompatible("tir_vars is gone")).status == "incompatible"
    missing = ModuleNotFoundError("No module named 'tvm.dlight'", name="tvm.dlight")
    assert classify(missing).status == "incompatible"
    assert classify(AttributeError("module 'tvm.relax' has no attribute 'Foo'")).status == \
        "incompatible"
    assert classify(AttributeError("'NoneType' object has no attribute 'x'")).status == "error"
    assert classify(SystemExit(0)).status == "ok"
    exit_3 = classify(SystemExit(3))
    assert (exit_3.status, exit_3.error_type) == ("error", "SystemExit")
    assert classify(ValueError("x")).signature == "ValueError: x"
