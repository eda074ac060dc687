# The shape of a reshape is known only after FoldConstant, which the default pipeline runs
# after LegalizeOps: the R.add after it stays an operator and VM codegen refuses it. Its
# message was reworded in 0.27 ("cannot handle this intrinsic now" became "cannot emit this
# Relax operator directly"), raised by the same C++ function (apache/tvm#20192).
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")):
        s = R.shape_of(x)
        t = R.shape_to_tensor(s)
        target = R.tensor_to_shape(t)
        y = R.reshape(x, target)
        z = R.add(y, y)
        return z


ex = relax.build(Module, target="llvm")
