import torch.nn as nn


class ResNetLike(nn.Module):
    def __init__(self, channels=64, num_classes=100):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 7, stride=2, padding=3)
        self.body = nn.Sequential(*[nn.Conv2d(channels, channels, 3, padding=1) for _ in range(4)])
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        return self.fc(self.body(self.stem(x)).mean((2, 3)))


class MLPMixer(nn.Module):
    def __init__(self, dim=256, num_classes=100):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 16, stride=16)
        self.mix = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, x):
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        return self.fc(self.mix(tokens).mean(1))
