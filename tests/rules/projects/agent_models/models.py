import torch
from torch import nn


class WorldModel(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 32, 4, stride=2), nn.ReLU(), nn.Flatten(), nn.LazyLinear(dim))
        self.dynamics = nn.GRUCell(dim, dim)
        self.opt = torch.optim.Adam(self.parameters(), lr=3e-4, fused=True)

    def train_step(self, obs):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            embed = self.encoder(obs)
            loss = self.dynamics(embed).pow(2).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return {"loss": loss.detach()}
