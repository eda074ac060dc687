import numpy as np
import torch
from torch import fx
from torch.nn import Module
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_fx


# Original PyTorch model
class Model(Module):
    def forward(self, input: torch.Tensor, other: torch.Tensor):
        input.bitwise_or_(other)
        return input


graph_model = fx.symbolic_trace(Model())
input_info = [((128, 128), "int32"), ((128, 128), "int32")]
with torch.no_grad():
    mod = from_fx(graph_model, input_info)
mod.show()

# The IR should return the tensor updated in place, i.e. input | other.
rng = np.random.default_rng(0)
a = rng.integers(0, 1 << 16, size=(128, 128), dtype=np.int32)
b = rng.integers(0, 1 << 16, size=(128, 128), dtype=np.int32)
expected = a | b

ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
out = vm["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b))
np.testing.assert_array_equal(out.numpy(), expected)
print("match")
