import torch
import torch.nn as nn


class GridMLP(nn.Module):
    def __init__(self, reso, feat_dim=27, hidden=128):
        super().__init__()
        self.grid = nn.Parameter(0.1 * torch.randn(1, feat_dim, reso, reso, reso))
        self.mlp = nn.Sequential(nn.Linear(feat_dim, hidden), nn.ReLU(), nn.Linear(hidden, 4))

    def forward(self, xyz):
        feats = nn.functional.grid_sample(self.grid, xyz.view(1, -1, 1, 1, 3), align_corners=True)
        return self.mlp(feats.view(self.grid.shape[1], -1).t())


class PlaneMLP(GridMLP):
    pass
