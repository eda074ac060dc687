"""Porting rules as text rewrites, chosen by the features of the target TVM (no TVM needed)."""

from __future__ import annotations

import sys

import pytest

from images import IMAGES_DIR

sys.path.insert(0, str(IMAGES_DIR))  # the harness is a top-level package inside images/
from harness.porting import Features, Incompatible, port, port_target  # noqa: E402

TVM_025 = Features(out_ty=False, call_tir_vars=True, struct_info=True,
                   modules=frozenset({"arith", "relax.struct_info", "relax.distributed.struct_info"}))
TVM_026 = Features(modules=frozenset({"arith", "relax.type", "relax.distributed.type"}))
TVM_027 = Features()
OLD_TIR = '''from tvm.script import tir as T
@T.prim_func(private=True)
def f(a: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("b"):
            T.block_attr({"axis": 0})
            a[i] = 1.0
@T.prim_func
def g():
    with T.block("root"):
        T.evaluate(0)
'''


def test_old_tir_becomes_tirx_with_sblocks_and_s_tir() -> None:
    text, rules = port(OLD_TIR, TVM_025)
    assert "from tvm.script import tirx as T" in text
    assert 'T.sblock("b")' in text and "T.sblock_attr(" in text and "T.block(" not in text
    assert "@T.prim_func(private=True, s_tir=True)" in text
    assert "@T.prim_func(s_tir=True)\ndef g" in text
    assert rules == ["tir-to-tirx", "block-to-sblock", "prim-func-s_tir"]


def test_out_sinfo_becomes_out_ty_only_where_needed() -> None:
    source = "R.call_tir(cls.f, (x,), out_sinfo=R.Tensor((4,), 'float32'))"
    assert port(source, TVM_025) == (source, [])
    text, rules = port(source, TVM_027)
    assert "out_ty=R.Tensor" in text and rules == ["out_sinfo-to-out_ty"]


def test_new_scripts_are_ported_back_to_025() -> None:
    text, rules = port("R.call_tir(f, (x,), out_ty=t)\nR.call_pure_packed(g, ty_args=t)", TVM_025)
    assert "out_sinfo=t" in text and "sinfo_args=t" in text
    assert rules == ["out_ty-to-out_sinfo", "ty_args-to-sinfo_args"]


def test_struct_info_names_become_types_on_026_and_later() -> None:
    text, rules = port("relax.TensorStructInfo((4,), 'float32')\nx.struct_info", TVM_027)
    assert text == "relax.TensorType((4,), 'float32')\nx.ty"
    assert rules == ["struct_info-to-type"]
    assert port("relax.TensorStructInfo((4,))", TVM_025)[1] == []


def test_runtime_api_moves() -> None:
    source = "import tvm\nfrom tvm import dlight as dl\na = tvm.nd.array(x)\nprint(a.asnumpy())\n"
    text, rules = port(source, TVM_027)
    assert "from tvm.s_tir import dlight as dl" in text
    assert "tvm.runtime.tensor(x)" in text and "a.numpy()" in text
    assert rules == ["dlight-and-schedule-to-s_tir", "nd-array-to-runtime-tensor"]


def test_tir_vars_cannot_be_expressed_after_its_removal() -> None:
    source = "R.call_tir(f, (x,), out_sinfo=t, tir_vars=R.shape([n]))"
    with pytest.raises(Incompatible, match="tir_vars"):
        port(source, TVM_027)
    assert "tir_vars" in port(source, TVM_025)[0]


def test_port_is_idempotent() -> None:
    once, _ = port(OLD_TIR, TVM_027)
    assert port(once, TVM_027) == (once, [])


def test_target_strings_with_flags_become_dicts() -> None:
    source = 'ex = relax.build(mod, target=tvm.target.Target("cuda -arch=sm_80 -max_num_threads=1024"))\n' \
             "t = Target('llvm -mcpu=skylake -mattr=+avx2,+fma')\nplain = Target('llvm')\n"
    text, rules = port(source, TVM_027)
    assert "Target({'kind': 'cuda', 'arch': 'sm_80', 'max_num_threads': 1024})" in text
    assert "Target({'kind': 'llvm', 'mcpu': 'skylake', 'mattr': ['+avx2', '+fma']})" in text
    assert "Target('llvm')" in text
    assert rules == ["target-string-to-dict"]
    assert port(source, Features(target_flags=True)) == (source, [])


def test_case_target_is_ported_too() -> None:
    assert port_target("cuda -arch=sm_90", TVM_027) == {"kind": "cuda", "arch": "sm_90"}
    assert port_target("llvm", TVM_027) == "llvm"
    assert port_target("cuda -arch=sm_90", Features(target_flags=True)) == "cuda -arch=sm_90"


def test_moved_modules_and_renamed_tensor() -> None:
    source = ("from tvm import meta_schedule as ms\nsch = tvm.tir.Schedule(mod)\n"
              "a = tvm.runtime.ndarray.array(x)\nassert isinstance(a, tvm.nd.NDArray)\n")
    text, _ = port(source, TVM_027)
    assert text == ("from tvm.s_tir import meta_schedule as ms\nsch = tvm.s_tir.Schedule(mod)\n"
                    "a = tvm.runtime.tensor(x)\nassert isinstance(a, tvm.runtime.Tensor)\n")


ARITH_SCRIPT = """import tvm
from tvm import arith, tirx
from tvm import te, arith as ar
import tvm.arith
from tvm.arith.iter_affine_map import IterMapLevel
a = tvm.arith.Analyzer()
b = arith.detect_iter_map
"""


def test_arith_moves_to_sym_on_027_and_back() -> None:
    text, rules = port(ARITH_SCRIPT, TVM_027)
    assert rules == ["arith-to-sym"]
    assert text == ARITH_SCRIPT.replace("tvm.arith", "tvm.sym").replace(
        "from tvm import arith,", "from tvm import sym as arith,").replace(
        "arith as ar", "sym as ar")
    assert port(ARITH_SCRIPT, TVM_026) == (ARITH_SCRIPT, [])
    back, rules = port(text, TVM_026)
    assert rules == ["sym-to-arith"]
    assert back == ARITH_SCRIPT


def test_struct_info_module_becomes_type_before_its_classes_are_renamed() -> None:
    source = ("from tvm.relax.struct_info import TensorStructInfo\nfrom tvm.relax import struct_info\n"
              "t = relax.struct_info.TensorStructInfo((4,), 'float32')\n")
    text, rules = port(source, TVM_027)
    assert text == ("from tvm.relax.type import TensorType\nfrom tvm.relax import type as struct_info\n"
                    "t = relax.type.TensorType((4,), 'float32')\n")
    assert rules == ["relax-struct_info-to-relax-type", "struct_info-to-type"]
    assert port(source, TVM_025) == (source, [])
    assert port("import tvm.relax.type as rt\n", TVM_025) == (
        "import tvm.relax.struct_info as rt\n", ["relax-type-to-relax-struct_info"])


def test_types_as_struct_info_are_ported_back_to_025() -> None:
    # Written for 0.26+: relax.TensorType is the struct info; on 0.25 it is a type of ndim
    # and dtype, and the script failed there with a TypeError, as if TVM had a bug.
    source = ("from tvm import relax\nfrom tvm.relax import TupleType, TensorType\n"
              "x = relax.Var('x', relax.TensorType((2, 3), 'float32'))\nprint(x.ty)\n")
    text, rules = port(source, TVM_025)
    assert text == ("from tvm import relax\nfrom tvm.relax import TupleStructInfo, "
                    "TensorStructInfo\nx = relax.Var('x', relax.TensorStructInfo((2, 3), "
                    "'float32'))\nprint(x.struct_info)\n")
    assert rules == ["type-to-struct_info"]
    assert port(source, TVM_027) == (source, [])
    # A script that names struct info is 0.25's own: its relax.TensorType is 0.25's type.
    own = "t = relax.TensorType(2, 'float32')\ns = relax.TensorStructInfo((4,), 'float32')\n"
    assert port(own, TVM_025) == (own, [])
