import torch
from torch import nn


class Denoiser(nn.Module):
    def __init__(self, channels=64, depth=4):
        super().__init__()
        layers = [nn.Conv2d(3, channels, 3, padding=1)]
        for _ in range(depth):
            layers += [nn.GroupNorm(8, channels), nn.SiLU(), nn.Conv2d(channels, channels, 3, padding=1)]
        layers.append(nn.Conv2d(channels, 3, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, x, sigma):
        return self.body(x) * sigma.view(-1, 1, 1, 1)
