# apache/tvm#20200: re-running KillAfterLastUse on a module the default CPU pipeline already
# lowered makes the compiled VM codegen fail (CodeGenVMTIR::EmitKillObject); the bytecode
# build of the same module works. Written from the description (its stored text stops
# before the script's end).
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            z = R.add(x, y)
            w = R.multiply(z, y)
            R.output(w)
        return w


target = tvm.target.Target("llvm")
lowered = relax.get_default_pipeline(target)(Module)
# Control: the bytecode VM accepts the twice-lowered module.
twice = relax.transform.KillAfterLastUse()(lowered)
relax.build(twice, target=target, relax_pipeline=None, exec_mode="bytecode")
# The bug: the compiled VM codegen does not.
ex = relax.build(twice, target=target, relax_pipeline=None, exec_mode="compiled")
print("built")
