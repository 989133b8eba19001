from torch import nn


class BaseAE(nn.Module):
    def encode(self, x):
        raise NotImplementedError
