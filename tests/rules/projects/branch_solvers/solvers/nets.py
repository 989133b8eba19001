from torch import nn


class ResidualNet(nn.Module):
    def __init__(self, width=64, blocks=8):
        super().__init__()
        self.head = nn.Conv2d(3, width, 3, padding=1)
        self.body = nn.Sequential(*[nn.Conv2d(width, width, 3, padding=1) for _ in range(blocks)])
        self.tail = nn.Conv2d(width, 3, 3, padding=1)

    def forward(self, x):
        return x + self.tail(self.body(self.head(x)))


class PatchCritic(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, width, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(width, 1, 4, 2, 1))

    def forward(self, x):
        return self.net(x)
