import torch.nn as nn


class Generator(nn.Module):
    def __init__(self, ch=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(ch, 64, 7, padding=3), nn.InstanceNorm2d(64), nn.ReLU(),
                                  nn.Conv2d(64, ch, 7, padding=3), nn.Tanh())

    def forward(self, x):
        return self.body(x)


class Critic(nn.Module):
    def __init__(self, ch=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(ch, 64, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(64, 1, 4, 1, 1))

    def forward(self, x):
        return self.body(x)
