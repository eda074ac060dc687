# apache/tvm#20195: FuseOps moves a call_tir whose output type names a symbolic variable (s1)
# before the match_cast that defines it; the module it leaves is not well formed ("Symbolic Var
# s1 is not defined"), and the build then fails in VMShapeLower. Written from the issue's own
# words (its stored text stops before the script's end): copy_2d, the match_cast of
# second_shape to R.Shape([s1, 8]), and the LLVM target's default pass prefix up to FuseOps.
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class Module:
    @T.prim_func(private=True, s_tir=True)
    def copy_2d(a: T.handle, b: T.handle):
        n = T.int64()
        m = T.int64()
        A = T.match_buffer(a, (n, T.int64(8)), "float32")
        B = T.match_buffer(b, (m, T.int64(8)), "float32")
        for i, j in T.grid(m, T.int64(8)):
            with T.sblock("copy"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]

    @R.function
    def main(x: R.Tensor(("s0", 8), "float32"), second_shape: R.Shape(ndim=2)):
        s0 = T.int64()
        s1 = T.int64()
        cls = Module
        with R.dataflow():
            first_copy = R.call_tir(cls.copy_2d, (x,), out_ty=R.Tensor((s0, 8), "float32"))
            first_exp = R.exp(first_copy)
            second_shape_bound = R.match_cast(second_shape, R.Shape([s1, 8]))
            second_copy = R.call_tir(cls.copy_2d, (first_exp,), out_ty=R.Tensor((s1, 8), "float32"))
            second_exp = R.exp(second_copy)
            R.output(second_exp)
        return second_exp


# The LLVM target's default pass prefix, FuseOps included (cpu_generic's library dispatch and
# legalization passes first), applied pass by pass as in the issue.
target = tvm.target.Target("llvm")
mod = Module
for p in [relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
          relax.transform.FoldConstant(), relax.transform.FuseOps()]:
    mod = p(mod)
# FuseOps moved second_copy (whose type names s1) before the match_cast that defines s1.
ex = relax.build(mod, target=target)
print("built")
