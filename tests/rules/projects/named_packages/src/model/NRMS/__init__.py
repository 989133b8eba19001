import torch.nn as nn


class NRMS(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = nn.MultiheadAttention(config.dim, config.heads, batch_first=True)
        self.score = nn.Linear(config.dim, 1)

    def forward(self, clicked, candidates):
        user, _ = self.attention(clicked, clicked, clicked)
        return (self.score(user).mean(1) * candidates).sum(-1)
