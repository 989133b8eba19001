"""A helper object the models build inside their forward (once per call)."""
import torch


class NeighbourMask:
    def __init__(self, centres, points, radius):
        n = points.shape[1]
        order = torch.arange(n).to(points.device)
        dist = torch.cdist(centres, points)
        self.keep = (dist < radius) & (order[None, None, :] < n)


class CausalMask:
    def __init__(self, length, device):
        self.mask = torch.ones(length, length, dtype=torch.bool).to(device).triu(1)
