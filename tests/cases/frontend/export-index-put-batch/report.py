import numpy as np
import torch
import torch.nn as nn
from torch.export import export as torch_export
from tvm.relax.frontend.torch import from_exported_program
import tvm
from tvm import relax

class IndexAssign(nn.Module):
    def forward(self, x):                 # x: [B, 10]
        B = x.size(0)
        M = torch.zeros(B, 11, 11)        # could also set device/dtype to match x
        rows = torch.arange(10)
        cols = rows + 1
        M[:, rows, cols] = x
        return M

torch.manual_seed(0)
x = torch.randn(2, 10)
m = IndexAssign().eval()
expected = m(x).numpy()

ep = torch_export(m, (x,))
mod = from_exported_program(ep)
ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
out = vm["main"](tvm.runtime.tensor(x.numpy()))
out = out if hasattr(out, "numpy") else out[0]  # a one-tensor tuple by default
np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
print("match")
