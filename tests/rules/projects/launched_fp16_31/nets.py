import torch
import torch.nn as nn


class UNet(nn.Module):
    def __init__(self, channels=128, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Conv2d(channels if i else 3, channels, 3, padding=1) for i in range(depth))
        self.head = nn.Conv2d(channels, 3, 1)
        self.dtype = torch.float32

    def convert_to_fp16(self):
        """Half-precision convolutions; the trainer keeps float32 master weights."""
        for block in self.blocks:
            block.half()
        self.dtype = torch.float16

    def forward(self, x, t):
        h = x.type(self.dtype)
        for block in self.blocks:
            h = torch.relu(block(h))
        return self.head(h.float())
