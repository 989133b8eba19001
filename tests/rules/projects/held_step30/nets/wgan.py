import torch
from torch import nn

from .base_model import BaseGANModel


class WGAN(BaseGANModel):
    def __init__(self, latent_dim, device="cuda"):
        super().__init__(latent_dim, device)
        self.gen = nn.Sequential(nn.Linear(latent_dim, 3 * 64 * 64), nn.Tanh(), nn.Unflatten(1, (3, 64, 64))).to(device)
        self.disc = nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(),
                                  nn.Linear(64 * 32 * 32, 1)).to(device)
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=1e-4, betas=(0.0, 0.9))
        self.opt_d = torch.optim.Adam(self.disc.parameters(), lr=1e-4, betas=(0.0, 0.9))
