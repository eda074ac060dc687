"""A GAN generator's ConvTranspose2d layers through from_exported_program and tvm.compile."""

import torch
import torch.nn as nn
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class Generator(nn.Module):
    """A DCGAN-style generator: a latent vector up to a 3-channel image."""

    def __init__(self, latent=16, features=8):
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(latent, features * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(features * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(features * 2, features, 4, 2, 1, dilation=2, bias=False),
            nn.BatchNorm2d(features),
            nn.ReLU(True),
            nn.ConvTranspose2d(features, 3, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.net(z)


torch.manual_seed(0)
model = Generator().eval()
z = torch.randn(1, 16, 1, 1)
with torch.no_grad():
    expected = model(z)

exported = torch.export.export(model, (z,))
mod_from_torch = from_exported_program(exported)
exec = tvm.compile(mod_from_torch, target="llvm")
vm = relax.VirtualMachine(exec, tvm.cpu())
got = vm["main"](tvm.runtime.tensor(z.numpy()))[0].numpy()
print("max abs error vs torch:", abs(got - expected.numpy()).max())
