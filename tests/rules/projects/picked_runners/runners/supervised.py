import torch.nn.functional as F

from .base import BaseRunner


class SupervisedRunner(BaseRunner):
    def __init__(self, args, net, loader):
        super().__init__(args, net, loader)
        self.smoothing = 0.1

    def loss(self, x, y):
        return F.cross_entropy(self.net(x), y, label_smoothing=self.smoothing)
