from .segnet_parts import *


class SegNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.inc = DoubleConv(n_channels, 64)
        self.down = Down(64, 128)
        self.outc = nn.Conv2d(128, n_classes, 1)

    def forward(self, x):
        return self.outc(self.down(self.inc(x)))
