import torch.nn as nn

REGISTRY = {}


def register(cls):
    REGISTRY[cls.__name__.lower()] = cls
    return cls


@register
class Tagger(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed = nn.Embedding(cfg["vocab"], cfg["dim"])
        self.mix = nn.TransformerEncoder(nn.TransformerEncoderLayer(cfg["dim"], 8, batch_first=True), 4)
        self.out = nn.Linear(cfg["dim"], cfg["tags"])

    def forward(self, tokens):
        return self.out(self.mix(self.embed(tokens)))


def make_network(cfg):
    return REGISTRY[cfg["arch"]](cfg)
