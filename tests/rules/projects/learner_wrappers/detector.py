"""A trainer that is itself a module: it wraps the detector, computes the losses in forward and
runs the backward and the optimizer step in train_step."""
import torch
from torch import nn


class TinyDetector(nn.Module):
    def __init__(self, classes=20):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(7))
        self.head = nn.Linear(64 * 49, classes + 4)

    def forward(self, x):
        return self.head(self.backbone(x).flatten(1))


class DetectorTrainer(nn.Module):
    def __init__(self, detector):
        super().__init__()
        self.detector = detector
        self.optimizer = torch.optim.SGD(detector.parameters(), lr=1e-3, momentum=0.9, fused=True)

    def forward(self, images, targets):
        return nn.functional.smooth_l1_loss(self.detector(images), targets)

    def train_step(self, images, targets):
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.forward(images, targets)
        loss.backward()
        self.optimizer.step()
        return loss.detach()
