import copy

import torch
import torch.nn as nn


class ModelEma(nn.Module):
    def __init__(self, model, decay=0.999):
        super().__init__()
        self.module = copy.deepcopy(model).eval()
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for e, m in zip(self.module.parameters(), model.parameters()):
            e.mul_(self.decay).add_(m, alpha=1 - self.decay)
