import torch.nn as nn

from .registry import register_model


class ConvNet(nn.Module):
    def __init__(self, width=32, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


@register_model
def convnet_small(**kwargs):
    return ConvNet(width=32, **kwargs)


@register_model
def convnet_wide(**kwargs):
    return ConvNet(width=128, **kwargs)
