import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=32000, dim=512, depth=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(dim, 8, batch_first=True) for _ in range(depth))
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens):
        h = self.embed(tokens)
        for block in self.blocks:
            h = block(h)
        return self.out(h)
