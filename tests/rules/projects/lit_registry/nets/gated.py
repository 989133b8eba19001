from torch import nn

from nets import BaseAE


class GatedAE(BaseAE):
    def __init__(self, channels=3, width=64, **unused):
        super().__init__()
        self.enc = nn.Conv2d(channels, width, 3, padding=1)
        self.gate = nn.Linear(width, width)
        self.dec = nn.Conv2d(width, channels, 3, padding=1)

    def forward(self, x):
        h = self.enc(x)
        g = self.gate(h.mean((2, 3))).sigmoid()[:, :, None, None]
        return self.dec(h * g)
