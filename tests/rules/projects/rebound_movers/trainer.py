import torch
import torch.nn as nn

from utils import *


class Trainer:
    def __init__(self, loader, G: nn.Module, D: nn.Module, z_dim: int, device: torch.device):
        self.loader, self.G, self.D, self.z_dim = loader, G.to(device), D.to(device), z_dim
        self.g_opt = torch.optim.Adam(G.parameters(), 2e-4)
        self.d_opt = torch.optim.Adam(D.parameters(), 2e-4)

    def train(self, steps: int):
        it = iter(self.loader)
        for step in range(steps):
            try:
                real, _ = next(it)
            except StopIteration:
                it = iter(self.loader)
                real, _ = next(it)
            real = tensor2var(real)
            z = tensor2var(torch.randn(real.size(0), self.z_dim))
            d_loss = nn.functional.relu(1.0 - self.D(real)).mean() + nn.functional.relu(1.0 + self.D(self.G(z))).mean()
            self.d_opt.zero_grad()
            d_loss.backward()
            self.d_opt.step()
            alpha = tensor2var(torch.rand(real.size(0), 1, 1, 1)).expand_as(real)
            mixed = (alpha * real.data + (1 - alpha) * self.G(z).data).requires_grad_(True)
            grad = torch.autograd.grad(self.D(mixed).sum(), mixed, create_graph=True)[0]
            gp = ((grad.view(grad.size(0), -1).norm(2, dim=1) - 1) ** 2).mean()
            self.d_opt.zero_grad()
            (10 * gp).backward()
            self.d_opt.step()
            z = tensor2var(torch.randn(real.size(0), self.z_dim))
            g_loss = -self.D(self.G(z)).mean()
            self.g_opt.zero_grad()
            g_loss.backward()
            self.g_opt.step()
            if step % 1000 == 0:
                print(denorm(self.G(z)).mean())
