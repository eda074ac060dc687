# The same logic written for TVM 0.27 by hand.
import tvm
from tvm import sym, tirx

x = tirx.Var("x", "int32")
analyzer = sym.Analyzer()
analyzer.bind(x, tvm.ir.Range(0, 8))
print(analyzer.simplify((x * 4 + 3) // 4))
print(analyzer.can_prove(x < 8))
iters = sym.detect_iter_map([x * 2 + 1], {x: tvm.ir.Range(0, 8)})
print(len(iters.indices))
