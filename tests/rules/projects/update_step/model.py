import torch
from torch import nn


def make_net():
    return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 10))


def make_stream(accum=4, batch=32):
    while True:
        yield [(torch.randn(batch, 256), torch.randint(0, 10, (batch,))) for _ in range(accum)]
