"""Helpers of the set-abstraction layers: module-level functions the layers' forward calls."""
import torch
import torch.nn as nn

from layers.masks import NeighbourMask
from ops.geometry import pairwise_offsets


def pick_rows(points, idx):
    device = points.device
    batch = torch.arange(points.shape[0]).to(device).view(-1, 1)
    return points[batch, idx]


def farthest_sample(xyz, n):
    device = xyz.device
    b, count, _ = xyz.shape
    chosen = torch.zeros(b, n, dtype=torch.long).to(device)
    distance = torch.full((b, count), 1e10).to(device)
    seed = torch.randint(0, count, (b,)).to(device)
    for i in range(n):
        chosen[:, i] = seed
        centre = pick_rows(xyz, seed.view(b, 1))
        distance = torch.minimum(distance, ((xyz - centre) ** 2).sum(-1))
        seed = distance.argmax(-1)
    return chosen


def unused_table(n, device):
    return torch.ones(n).to(device)


class SetAbstraction(nn.Module):
    def __init__(self, npoint, dim):
        super().__init__()
        self.npoint = npoint
        self.mlp = nn.Linear(dim, dim)
        self.register_buffer("scale", torch.ones(dim).to("cpu"))

    def forward(self, xyz, feats):
        idx = farthest_sample(xyz, self.npoint)
        centres = pick_rows(xyz, idx)
        mask = NeighbourMask(centres, xyz, radius=0.2)
        offsets = pairwise_offsets(centres, xyz)
        return self.mlp(pick_rows(feats, idx)) * self.scale, mask.keep, offsets
