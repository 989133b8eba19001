import torch
from torch import nn

from . import blocks
from .catalog import register_net

stage = blocks.conv_bn


@register_net(name="plain")
class PlainDenoiser(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        width = cfg["width"]
        self.body = nn.Sequential(stage(3, width), stage(width, width), nn.Conv2d(width, 3, 1))

    def forward(self, x):
        return x - self.body(x)


@register_net(name="gated")
class GatedDenoiser(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        width = cfg["width"]
        self.feat = stage(3, width)
        self.gate = nn.Conv2d(width, width, 1)
        self.head = nn.Conv2d(width, 3, 3, padding=1)

    def forward(self, x):
        h = self.feat(x)
        h = h * torch.sigmoid(self.gate(h))
        return x - self.head(h)
