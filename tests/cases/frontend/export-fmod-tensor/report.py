import torch
from tvm.relax import frontend
from tvm.relax.frontend.torch import from_exported_program
from torch.export import export
import torch.nn as nn

class FModModule(nn.Module):
    def __init__(self):
        super(FModModule, self).__init__()
    
    def forward(self, x, y):
        return torch.fmod(x, y)

if __name__ == "__main__":
    torch.manual_seed(0)
    model = FModModule()
    example_args = (torch.randn(3, 3), torch.randn(3, 3))
    
    with torch.no_grad():
        exported_program = export(model, example_args)
        mod = from_exported_program(exported_program, keep_params_as_input=True)
    
    mod, params = frontend.detach_params(mod)
    mod.show()
