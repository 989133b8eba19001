import torch
from torch import nn


class Segmenter(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))
        self.decoder = nn.Conv2d(64, num_classes, 1)

    def forward(self, x):
        return self.decoder(self.backbone(x))

    def backbone_parameters(self):
        return [p for name, p in self.named_parameters() if name.startswith("backbone.")]

    def decoder_parameters(self):
        for module in self.decoder.modules():
            for p in module.parameters(recurse=False):
                if p.requires_grad:
                    yield p
