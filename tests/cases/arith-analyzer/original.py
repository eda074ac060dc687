# Written for TVM 0.25/0.26, where the arithmetic analyzer lives in the arith module.
import tvm
from tvm import arith, tirx

x = tirx.Var("x", "int32")
analyzer = arith.Analyzer()
analyzer.bind(x, tvm.ir.Range(0, 8))
print(analyzer.simplify((x * 4 + 3) // 4))
print(analyzer.can_prove(x < 8))
iters = arith.detect_iter_map([x * 2 + 1], {x: tvm.ir.Range(0, 8)})
print(len(iters.indices))
