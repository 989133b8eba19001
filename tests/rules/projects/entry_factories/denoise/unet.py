import torch
from torch import nn


class TinyUNet(nn.Module):
    def __init__(self, channels, width):
        super().__init__()
        self.down = nn.Conv2d(channels, width, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(width, channels, 4, stride=2, padding=1)
        self.time = nn.Linear(1, width)

    def forward(self, x, t):
        h = torch.relu(self.down(x)) + self.time(t[:, None].float())[:, :, None, None]
        return self.up(h)
