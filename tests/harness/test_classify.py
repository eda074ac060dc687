"""Classification and signatures: one bug reads the same on every TVM version (no TVM needed)."""

from __future__ import annotations

import sys

from images import IMAGES_DIR

sys.path.insert(0, str(IMAGES_DIR))
from harness.classify import classify, first_line, signature  # noqa: E402
from harness.porting import Incompatible  # noqa: E402
from harness.signature import frame_name, make, normalize, program_names  # noqa: E402

MSG_2024 = ("Check failed: (func.defined()) is false: Error: Cannot find PackedFunc "
            "fused_relax_nn_attention_cutlass_gv in either Relax VM kernel library, or in TVM "
            "runtime PackedFunc registry, or in global Relax functions of the VM executable")
MSG_2026 = ("Check failed: (func.has_value()) is false: Error: Cannot find ffi::Function "
            "fused_relax_nn_attention_cutlass_gv in either Relax VM kernel library, or in TVM "
            "runtime ffi::Function registry, or in global Relax functions of the VM executable")


def test_the_2024_report_reads_as_today_as_printed() -> None:
    # PackedFunc -> ffi::Function, and the check's func.defined() -> func.has_value().
    old = signature("InternalError", MSG_2024)
    assert old == signature("InternalError", MSG_2026)
    assert "fused_relax_nn_attention_cutlass_gv" in old and "is set" in old


def test_presence_checks_read_one_way() -> None:
    spelled = ["(x.defined())", "(x.has_value())", "(!x.IsMissing())", "(x != nullptr)",
               "(x.get() != nullptr)"]
    assert {normalize(f"Check failed: {c} is false: m") for c in spelled} == {
        "Check failed: (x is set) is false: m"}
    # Seen in the 0.25 -> 0.26 source diff: the same check, its field renamed with it.
    assert normalize("Check failed: (param->struct_info_.defined()) is false") == \
        normalize("Check failed: (!param->ty.IsMissing()) is false") == \
        "Check failed: (param->ty is set) is false"
    assert normalize("Check failed: (!op->shape.defined()) is false") == \
        normalize("Check failed: (!op->shape.has_value()) is false")


# Printed by apache-tvm 0.25.0 and 0.27.0.post1 for relax.Tuple([relax.Var("x"), 1.5j]).
FFI_025 = ("Mismatched type on argument #0 when calling: `relax.Tuple(0: Array<ir.RelaxExpr>, "
           "1: ir.Span) -> relax.expr.Tuple`. Expected `Array<ir.RelaxExpr>` but got "
           "`Array[index 1: ffi.OpaquePyObject]`")
FFI_027 = ("Mismatched type on argument #0 when calling: `ir.Tuple(0: Array<ir.Expr>, 1: ir.Span) "
           "-> ir.Tuple`. Expected `Array<ir.Expr>` but got `Array[index 1: ffi.OpaquePyObject]`")


def test_ffi_function_signatures_in_messages_are_normalised() -> None:
    assert signature("TypeError", FFI_025) == signature("TypeError", FFI_027)
    assert "when calling: `Tuple(...)`" in normalize(FFI_027)
    extra_arg = FFI_027.replace("1: ir.Span)", "1: ir.Span, 2: Optional<ir.Span>)")
    assert normalize(extra_arg) == normalize(FFI_027)


# ir.Op("relax.add") as apache-tvm 0.25.0 and 0.27.0.post1 print it.
OP_025 = ('ir.Op(span=None, struct_info_=None, name="relax.add", op_type=None, description="", '
          'arguments=(ir.ArgumentInfo(name="x1", type_info="Tensor", description="The first input '
          'tensor."), ir.ArgumentInfo(name="x2", type_info="Tensor", description="The second input '
          'tensor.")), attrs_type_key="", num_inputs=2, support_level=10)')
OP_027 = ('ir.Op(span=None, ty=ir.Type(span=None), name="relax.add", description="", '
          'arguments=(ir.ArgumentInfo(name="x1", type_info="Tensor", description="The first input '
          'tensor."), ir.ArgumentInfo(name="x2", type_info="Tensor", description="The second input '
          'tensor.")), attrs_type_key="", num_inputs=2, support_level=10)')


def test_printed_ir_objects_read_as_type_and_name() -> None:
    old, new = (first_line(f"CodeGenVM cannot handle this intrinsic now:\n{op}") for op in (OP_025, OP_027))
    assert normalize(old) == normalize(new) == "CodeGenVM cannot handle this intrinsic now: Op(relax.add)"
    assert normalize("got Foo(a=1, b=Bar(c=2)) and Baz(x=1)") == "got Foo(...) and Baz(...)"


def test_frames_drop_namespaces_types_and_parameters() -> None:
    # InferStructInfoMatmul (0.25) is InferTypeMatmul (0.26+), seen in the two backtraces.
    assert frame_name("tvm::relax::StructInfo tvm::relax::InferStructInfoMatmul(const Call&, "
                      "const BlockBuilder&)") == "InferTypeMatmul"
    assert frame_name("tvm::Type tvm::relax::InferTypeMatmul(const tvm::Call&, "
                      "const BlockBuilder&)") == "InferTypeMatmul"
    assert frame_name("void tvm::runtime::vm::VirtualMachineImpl::InitFuncPool()") == \
        "VirtualMachineImpl::InitFuncPool"
    assert frame_name("tvm::relax::(anonymous namespace)::Mutator::VisitExpr_(tvm::relax::CallNode "
                      "const*)::{lambda(int)#1}::operator()(int) const") == "Mutator::VisitExpr_"
    # Frames that report (or convert FFI arguments) are not where the bug was detected.
    assert frame_name("void tvm::relax::BlockBuilderImpl::ReportFatal(tvm::Diagnostic const&)") is None
    assert frame_name("tvm::ffi::details::ArgValueWithContext<Type>::operator TypeWithoutCR() "
                      "[with Type = tvm::ffi::Array<tvm::Expr>]") is None


def test_the_frame_anchors_the_signature_and_the_message_stays_beside_it() -> None:
    vm = [("repro.py", "<module>"),
          ("/project/src/runtime/vm/vm.cc", "void tvm::runtime::vm::VirtualMachineImpl::InitFuncPool()")]
    anchored = make("InternalError", MSG_2026, vm)
    assert anchored.frame == "VirtualMachineImpl::InitFuncPool"
    assert anchored.text == ("InternalError at VirtualMachineImpl::InitFuncPool "
                             "(fused_relax_nn_attention_cutlass_gv)")
    assert anchored.message == normalize(MSG_2026)
    reworded = make("InternalError", "Error: no function fused_relax_nn_attention_cutlass_gv1 in "
                    "the executable", vm)
    assert reworded.text == anchored.text
    # Raised in Python (the innermost frame), or no frames at all: the message decides.
    python = make("ValueError", "bad", [*vm, ("/x/tvm/relax/block_builder.py", "emit")])
    assert (python.frame, python.text) == (None, "ValueError: bad")


def test_an_error_that_says_only_its_type_is_placed_in_tvms_python() -> None:
    # An empty `assert` in TVM's Python, reached from FoldConstant through the user's script.
    frames = [("/mnt/work/repro.py", "<module>"),
              ("/mnt/env/lib/python3.11/site-packages/tvm/ir/transform.py", "__call__"),
              ("/mnt/env/lib/python3.11/site-packages/tvm/relax/frontend/common.py", "autopad"),
              ("/mnt/harness/harness/tracing.py", "wrapped")]
    placed = make("AssertionError", "AssertionError", frames)
    assert placed.text == "AssertionError at autopad (common.py)"
    elsewhere = make("AssertionError", "AssertionError",
                     [*frames[:1], ("/mnt/env/lib/python3.11/site-packages/tvm/te/operation.py",
                                    "compute")])
    assert elsewhere.text != placed.text  # two bare asserts, two bugs
    assert make("AssertionError", "", frames[:1]).text == "AssertionError: "  # not in TVM
    # An error with something to say keeps the message as its signature (stable across
    # releases where functions are renamed).
    assert make("AssertionError", "shape mismatch", frames).text == \
        "AssertionError: shape mismatch"


def test_program_names_are_snake_case_identifiers_that_are_not_code() -> None:
    text = "Cannot find Function fused_add_relu1 in x.has_value() or tvm::some_ns::Foo or a_b("
    assert program_names(text) == ["fused_add_relu"]
    # The condition of a failed check is code, whichever way the check is spelled (0.25, 0.27).
    assert program_names(normalize("Check failed: value < 1LL << (dtype.bits() - 1) (2 vs. 2) : "
                                   "Literal value 2 exceeds maximum of int32")) == []
    assert program_names(normalize("Check failed: (small.has_value() && (*small < (int64_t{1} << "
                                   "(bits - 1)))) is false: Literal value 2 exceeds range of int32")) == []


def test_a_return_type_from_the_ffi_does_not_hide_the_frame() -> None:
    # InferBinaryArithOpOutDtype as 0.25 and 0.26 print it (0.26 returns an ffi::Optional).
    assert frame_name("tvm::DataType tvm::relax::InferBinaryArithOpOutDtype(const Call&, const "
                      "BlockBuilder&, const StructInfo&, const StructInfo&)") == \
        frame_name("tvm::ffi::Optional<tvm::PrimType> tvm::relax::InferBinaryArithOpOutDtype(const "
                   "tvm::Call&, const BlockBuilder&, const tvm::Type&, const tvm::Type&)") == \
        "InferBinaryArithOpOutDtype"


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
