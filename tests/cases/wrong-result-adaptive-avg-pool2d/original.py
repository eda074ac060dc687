# apache/tvm#20105 as its reporter checked it: adaptive_avg_pool2d 3x4 -> 2x2 on LLVM,
# compared with numpy; the assert after the VM call is the report's own check.
import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 1, 3, 4), dtype="float32")) -> R.Tensor((1, 1, 2, 2), dtype="float32"):
        gv: R.Tensor((1, 1, 2, 2), dtype="float32") = R.nn.adaptive_avg_pool2d(x, output_size=[2, 2])
        return gv


data = np.arange(12, dtype="float32").reshape(1, 1, 3, 4)
# Overlapping windows: height [0:2] and [1:3], width [0:2] and [2:4].
expected = np.array([[[[data[0, 0, h:h + 2, w:w + 2].mean() for w in (0, 2)] for h in (0, 1)]]],
                    dtype="float32")
ex = relax.build(Module, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
out = vm["main"](tvm.nd.array(data)).asnumpy()
assert np.allclose(out, expected), f"adaptive_avg_pool2d differs from numpy: {out.ravel()} != {expected.ravel()}"
