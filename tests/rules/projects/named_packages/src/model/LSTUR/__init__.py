import torch.nn as nn


class LSTUR(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.user = nn.GRU(config.dim, config.dim, batch_first=True)
        self.project = nn.Linear(config.dim, config.dim)

    def forward(self, clicked, candidates):
        _, last = self.user(clicked)
        return (self.project(last[-1]).unsqueeze(1) * candidates).sum(-1)
