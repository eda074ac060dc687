# apache/tvm#20194: FuseOps makes a private function named exactly "fused" for a selection
# through a nested tuple, and FuseTIR aborts on it (Check failed: func_info_.global_name !=
# "fused"), in the LLVM target's default Relax pipeline. Written from the description
# (its stored text stops where the script begins).
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            t = ((x, y), x)
            inner = t[0]
            sel = inner[1]
            R.output(sel)
        return sel


target = tvm.target.Target("llvm")
mod = relax.get_default_pipeline(target)(Module)
ex = relax.build(mod, target=target, relax_pipeline=None)
print("built")
