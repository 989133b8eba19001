import torch
import torch.nn as nn


class BPR(nn.Module):
    def __init__(self, n_users, n_items, dim=32):
        super().__init__()
        self.u = nn.Embedding(n_users, dim)
        self.i = nn.Embedding(n_items, dim)

    def forward(self, users, pos, neg):
        u = self.u(users)
        return -torch.log(torch.sigmoid((u * self.i(pos)).sum(-1) - (u * self.i(neg)).sum(-1))).mean()
