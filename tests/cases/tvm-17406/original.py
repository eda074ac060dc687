# apache/tvm#17406: after LambdaLift, the lifted outer function returns an untyped closure
# (R.Object, R.Any on 0.27), and relax.build fails on the call that uses it.
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        @R.function
        def outer_func(c1: R.Tensor((2, 3), dtype="float32")):
            @R.function
            def inner_func(x1: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
                s: R.Tensor((2, 3), dtype="float32") = R.add(x1, c1)
                return s

            return inner_func

        in_call = outer_func(x)
        res = in_call(y)
        res_1: R.Tensor((2, 3), dtype="float32") = R.add(res, x)
        return res_1


mod = relax.transform.LambdaLift()(Module)
print(mod)
ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
