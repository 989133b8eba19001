# The base model: `loss` is a stub every model overrides.
from torch import nn


class Model(nn.Module):
    def __init__(self, dim, vocab):
        super().__init__()
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def loss(self, batch):
        """Must be overridden by subclasses."""
        raise NotImplementedError
