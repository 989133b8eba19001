import torch.nn as nn


class SegNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))
        self.head = nn.Conv2d(64, num_classes, 1)

    def forward(self, x):
        return self.head(self.encoder(x))
