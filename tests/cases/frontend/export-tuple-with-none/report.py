# tvm_relax_export_none_repro.py
import torch
import torch.nn as nn

def versions():
    import tvm
    from tvm import relax
    print(f"torch=={torch.__version__}")
    print(f"tvm=={tvm.__version__}")
    print("tvm.relax.frontend.torch available:", hasattr(relax.frontend, "torch"))

class Tiny(nn.Module):
    def forward(self, x):
        # Key: returns (Tensor, None) — tuple with non-tensor element
        return x + 1, None

def repro():
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    torch.manual_seed(0)
    x = torch.randn(2, 3)
    ep = torch.export.export(Tiny().eval(), (x,))
    print("[step] from_exported_program ...")
    mod = from_exported_program(ep)
    print("[step] relax.build ...")
    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(x.numpy()))
    print("[done]", out)

if __name__ == "__main__":
    versions()
    repro()
