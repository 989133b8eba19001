import torch
import torch.nn as nn


class MessagePassing(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.msg = nn.Linear(dim, dim)
        self.upd = nn.GRUCell(dim, dim)

    def forward(self, h, adj):
        return self.upd(adj @ self.msg(h), h)


class SetConvNet(nn.Module):
    """A variant that convolves over a dense node-pair tensor."""

    def __init__(self, dim):
        super().__init__()
        self.pairs = nn.Conv2d(dim, dim, kernel_size=3, padding=1)

    def forward(self, h, adj):
        return self.pairs(h.unsqueeze(-1) * adj.unsqueeze(0)).sum(-1)


def build_network(kind, dim):
    networks = {"mpnn": MessagePassing, "setconv": SetConvNet}
    return networks[kind](dim)
