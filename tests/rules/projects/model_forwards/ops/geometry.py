"""Functional helpers (no module of their own)."""
import math

import torch


def pairwise_offsets(a, b):
    return a[:, :, None] - b[:, None]


def sinusoid(pos, dim, base=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(base) * torch.arange(half, dtype=torch.float32) / half).to(pos.device)
    angles = pos[..., None].float() * freqs
    return torch.cat([angles.sin(), angles.cos()], -1)
