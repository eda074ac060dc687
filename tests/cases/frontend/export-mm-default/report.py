import numpy as np
import torch
import torch.nn as nn
from torch.export import export as torch_export
from tvm.relax.frontend.torch import from_exported_program

class M(nn.Module):
    def forward(self, a, b):
        # Key op: torch.mm (2D matrix multiply)
        return torch.mm(a, b)

def main():
    import tvm
    from tvm import relax

    torch.manual_seed(0)
    m = M().eval()

    # Inputs: (2, 3) @ (3, 4) -> (2, 4)
    a = torch.randn(2, 3, dtype=torch.float32)
    b = torch.randn(3, 4, dtype=torch.float32)

    # 1) Check eager path
    with torch.inference_mode():
        y_ref = m(a, b)
    print("[eager] ok, shape:", tuple(y_ref.shape))

    # 2) Export
    ep = torch_export(m, (a, b))

    # 3) Import into Relax
    mod = from_exported_program(ep)
    print("[tvm] import ok")

    # 4) Build, run, compare
    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(a.numpy()), tvm.runtime.tensor(b.numpy()))
    out = out if hasattr(out, "numpy") else out[0]  # a one-tensor tuple by default
    np.testing.assert_allclose(out.numpy(), y_ref.numpy(), rtol=1e-5, atol=1e-5)
    print("[tvm] match")

if __name__ == "__main__":
    main()
