"""An experiment object: it builds the model and the optimizer over the model it holds."""

import torch

from zoo.denoisers import PlainDenoiser


class Recipe:
    def __init__(self, width=48, lr=1e-3):
        self.width = width
        self.lr = lr
        self.model = None

    def get_model(self):
        if self.model is None:
            self.model = PlainDenoiser({"width": self.width})
        return self.model

    def get_optimizer(self):
        decay = [p for p in self.model.parameters() if p.ndim > 1]
        rest = [p for p in self.model.parameters() if p.ndim <= 1]
        return torch.optim.SGD([{"params": decay, "weight_decay": 1e-4}, {"params": rest}], lr=self.lr,
                               momentum=0.9, foreach=True)
