"""Shared imports of the fine-tuning scripts."""
import random

import torch
from torch import nn, optim

FloatTensor = torch.FloatTensor
_scratch = torch.empty

__all__ = ["nn", "optim", "FloatTensor", "seed_all"]


def seed_all(seed):
    random.seed(seed)
    torch.manual_seed(seed)
