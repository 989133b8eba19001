from torch import nn

from nets import BaseAE  # the package imports this module back: a cycle Python resolves in order


class PlainAE(BaseAE):
    def __init__(self, channels=3, width=64, **unused):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(channels, width, 4, 2, 1), nn.ReLU())
        self.dec = nn.ConvTranspose2d(width, channels, 4, 2, 1)

    def forward(self, x):
        return self.dec(self.enc(x))
