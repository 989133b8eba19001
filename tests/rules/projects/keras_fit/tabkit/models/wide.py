from torch import nn

from ..base import TabularModel


class WideNet(TabularModel):
    def __init__(self, features, hidden=(256, 128), device="cpu"):
        super().__init__(device)
        layers, width = [], features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.body = nn.Sequential(*layers, nn.Linear(width, 1)).to(device)

    def forward(self, x):
        return self.body(x).squeeze(-1)
