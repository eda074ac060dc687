# Written for TVM 0.25: the struct_info module and tvm.arith.
import tvm
from tvm import relax, arith
from tvm.relax.struct_info import TensorStructInfo

info = TensorStructInfo((4, 2), "float32")
print(info.ndim, info.dtype)
print(arith.Analyzer().simplify(tvm.tirx.const(3, "int32") + 4))
