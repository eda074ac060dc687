import numpy as np
import onnx
import torch
import torch.nn as nn
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


class SoftplusModel(nn.Module):
    def __init__(self):
        super(SoftplusModel, self).__init__()
        self.softplus = nn.Softplus()
    
    def forward(self, x):
        return self.softplus(x)


model = SoftplusModel().eval()
x = torch.tensor([[1.0, 20.0, 100.0, 200.0, 500.0, 1000.0]], dtype=torch.float32)
torch.onnx.export(model, (x,), "softplus.onnx", input_names=["x"], output_names=["y"])

onnx_model = onnx.load("softplus.onnx")
mod = from_onnx(onnx_model)
ex = relax.build(mod, target="llvm")
vm = relax.VirtualMachine(ex, tvm.cpu())
out = vm["main"](tvm.runtime.tensor(x.numpy())).numpy()

expected = model(x).detach().numpy()
print("torch:", expected)
print("TVM  :", out)
assert np.all(np.isfinite(out)), "softplus produced non-finite values for large inputs"
np.testing.assert_allclose(out, expected, rtol=1e-5)
