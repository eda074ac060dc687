# apache/tvm#20192: the default LLVM pipeline legalizes ops before FoldConstant resolves a
# reshape's target shape; the R.add after that reshape is never legalized and VM codegen fails.
import numpy as np
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

    @R.function
    def control(x: R.Tensor((2, 3), dtype="float32")):
        # The same computation with a static target shape builds and runs.
        y = R.reshape(x, R.shape([2, 3]))
        z = R.add(y, y)
        return z


ex = relax.build(Module, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
data = np.arange(6, dtype="float32").reshape(2, 3)
for name in ("control", "main"):
    out = vm[name](tvm.runtime.tensor(data)).numpy()
    np.testing.assert_allclose(out, data + data)
    print(name, "ok")
