import torch
import torch.nn as nn
from torch.export import export as torch_export
from tvm.relax.frontend.torch import from_exported_program


class UnbindModel(nn.Module):
    def forward(self, x):
        # x has size 1 along dim 0, so unbind yields a one-element tuple of (3,) tensors
        return x.unbind(dim=0)


torch.manual_seed(0)
x = torch.randn(1, 3)
ep = torch_export(UnbindModel().eval(), (x,))

print("[INFO] start importing exported program into TVM Relax...")
try:
    mod = from_exported_program(ep)
except Exception as e:
    print("[REPRODUCED] Caught exception while importing:")
    print(e)
    raise
print("[INFO] import succeeded")
mod.show()
