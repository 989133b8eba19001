import torch


class RolloutStorage:
    """Keeps advantages on the GPU: `update` copies each batch's."""

    def __init__(self):
        self.adv = []

    def update(self, batch):
        self.adv.append(torch.tensor(batch["adv"]).cuda())


class ReturnStorage:
    def __init__(self):
        self.ret = []

    def update(self, batch, gamma=0.99):
        self.ret.append(torch.tensor(batch["ret"]).cuda() * gamma)


class AverageMeter:
    def __init__(self):
        self.sum = 0.0
        self.n = 0

    def update(self, value, n=1):
        self.sum += value * n
        self.n += n
