"""A callable optimizer wrapper (the Dreamer shape): the optimizer comes from a table of builders."""
import torch
from torch import nn


class Optimizer:
    def __init__(self, name, parameters, lr, eps=1e-4, clip=None, opt="adam"):
        self._name = name
        self._clip = clip
        self._opt = {
            "adam": lambda: torch.optim.Adam(parameters, lr=lr, eps=eps),
            "adamax": lambda: torch.optim.Adamax(parameters, lr=lr, eps=eps),
            "sgd": lambda: torch.optim.SGD(parameters, lr=lr),
        }[opt]()

    def __call__(self, loss, params):
        self._opt.zero_grad()
        loss.backward()
        if self._clip:
            nn.utils.clip_grad_norm_(params, self._clip)
        self._opt.step()
        return {f"{self._name}_loss": loss.detach()}
