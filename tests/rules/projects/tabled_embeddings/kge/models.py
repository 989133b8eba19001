import torch
from torch import nn


class Bilinear(nn.Module):
    def __init__(self, sizes, rank):
        super().__init__()
        self.ent = nn.Embedding(sizes[0], rank)
        self.rel = nn.Embedding(sizes[1], rank)

    def forward(self, x):
        lhs, rel = self.ent(x[:, 0]), self.rel(x[:, 1])
        return (lhs * rel) @ self.ent.weight.t()


class Diagonal(Bilinear):
    def forward(self, x):
        return torch.sigmoid(super().forward(x))
