import torch.nn as nn


class Detector(nn.Module):
    def __init__(self, depth=1.0, width=1.0, num_classes=80):
        super().__init__()
        ch = int(64 * width)
        self.backbone = nn.Sequential(nn.Conv2d(3, ch, 3, 2, 1), nn.SiLU(), nn.Conv2d(ch, ch, 3, 2, 1), nn.SiLU())
        self.head = nn.Conv2d(ch, num_classes + 5, 1)

    def forward(self, x):
        return self.head(self.backbone(x))
