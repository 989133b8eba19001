import math

import torch
from torch.optim import Optimizer


def get_optimizer(name):
    if name == "Adam":
        return torch.optim.Adam
    elif name == "RAdam":
        return RAdam


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"] / math.sqrt(1.0 + group["eps"]))
