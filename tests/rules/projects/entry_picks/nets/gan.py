import torch
from torch import nn

from .core import Model


class GAN(Model):
    def __init__(self, opts):
        super().__init__("GAN")
        self.G = nn.Sequential(nn.Conv1d(1, 64, 31, padding=15), nn.PReLU(), nn.Conv1d(64, 1, 31, padding=15))
        self.D = nn.Sequential(nn.Conv1d(2, 64, 31, stride=4), nn.LeakyReLU(0.3), nn.Flatten(), nn.LazyLinear(1))
        self.opts = opts

    def train(self, opts, loader, device):
        g_opt = torch.optim.RMSprop(self.G.parameters(), lr=opts.g_lr)
        d_opt = torch.optim.RMSprop(self.D.parameters(), lr=opts.d_lr)
        for epoch in range(opts.epochs):
            for clean, noisy in loader:
                clean, noisy = clean.to(device, non_blocking=True), noisy.to(device, non_blocking=True)
                fake = self.G(noisy)
                d_loss = (self.D(torch.cat([fake.detach(), noisy], 1)) ** 2).mean() + \
                    ((self.D(torch.cat([clean, noisy], 1)) - 1) ** 2).mean()
                d_opt.zero_grad()
                d_loss.backward()
                d_opt.step()
                g_loss = ((self.D(torch.cat([fake, noisy], 1)) - 1) ** 2).mean() + (fake - clean).abs().mean()
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()


class WGAN(GAN):
    def __init__(self, opts):
        super().__init__(opts)
        self.name = "WGAN"
