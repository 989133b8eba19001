import torch
from torch import nn


class MaskedL1(nn.Module):
    """Called on every training step by train.py: its forward and what it calls are per-step code."""

    def __init__(self, weight=1.0):
        super().__init__()
        self.weight = weight

    def forward(self, prediction, target, lengths):
        mask = self._mask(lengths, target.size(1))
        frames = (torch.arange(target.size(1)) * self.weight).to(target.device)
        valid = self._count(mask)
        return (prediction - target).abs().mul(mask).sum() / max(valid, 1) + frames.mean() * 0

    def _mask(self, lengths, width):
        steps = torch.arange(width)
        steps = steps.unsqueeze(0).expand(lengths.size(0), -1)
        steps = steps.to(lengths.device)
        return (steps < lengths.unsqueeze(1) * 256).float()

    def _count(self, mask):
        return mask.sum().item()
