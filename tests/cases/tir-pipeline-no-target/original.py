# The default TIR pipeline run as a pass on functions with no target attribute: a pass
# inside it (LowerThreadAllreduce) refuses them.
import tvm
from tvm.script import ir as I, tirx as T

@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def double(a: T.Buffer((4, 4), "float32"), b: T.Buffer((4, 4), "float32")):
        for i, j in T.grid(4, 4):
            with T.sblock("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                b[vi, vj] = a[vi, vj] * 2.0

# The default TIR pipeline, applied to functions that carry no target attribute.
pipeline = tvm.tirx.get_tir_pipeline("default")[0]
lowered = pipeline(Mod)
