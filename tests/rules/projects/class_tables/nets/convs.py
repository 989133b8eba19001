from torch import nn


class DilatedConvNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(cfg.channels, 64, 3, dilation=2, padding=2), nn.GELU(),
                                  nn.Conv1d(64, cfg.channels, 3, padding=1))

    def forward(self, x):
        return self.body(x.transpose(1, 2)).transpose(1, 2)


class ResidualConvNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.conv = nn.Conv1d(cfg.channels, cfg.channels, 5, padding=2)

    def forward(self, x):
        return x + self.conv(x.transpose(1, 2)).transpose(1, 2)
