# apache/tvm#17479: InlinePrivateFunctions applied directly leaves a private function's
# symbolic shape variables in main, and relax.build fails in VMShapeLower ("PrimExpr
# T.int64(4) * n * m in function main has not been computed"). The stored copy of the issue
# stops at the module's first lines (a private PrimFunc `add` over `var_x2: T.handle`); the
# rest is written from the description.
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tir as T


@I.ir_module
class Module:
    @T.prim_func(private=True)
    def add(var_x2: T.handle, var_y: T.handle, var_out: T.handle):
        n = T.int64()
        m = T.int64()
        x2 = T.match_buffer(var_x2, (n, m))
        y = T.match_buffer(var_y, (n, m))
        out = T.match_buffer(var_out, (n, m))
        for i, j in T.grid(n, m):
            with T.block("add"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = x2[vi, vj] + y[vi, vj]

    @R.function(private=True)
    def inner(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("n", "m"), "float32")) -> R.Tensor(("n", "m"), "float32"):
        n = T.int64()
        m = T.int64()
        cls = Module
        out = R.call_tir(cls.add, (x, y), out_sinfo=R.Tensor((n, m), "float32"))
        return out

    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("n", "m"), "float32")) -> R.Tensor(("n", "m"), "float32"):
        cls = Module
        out = cls.inner(x, y)
        return out


# Applied through Sequential and directly, the module comes out differently (the first
# point); the direct application does not build.
seq = tvm.transform.Sequential([relax.transform.InlinePrivateFunctions()])(Module)
mod = relax.transform.InlinePrivateFunctions()(Module)
print(seq.script() == mod.script())
ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
print("built")
