import torch


class Lion(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4):
        super().__init__(params, dict(lr=lr))
