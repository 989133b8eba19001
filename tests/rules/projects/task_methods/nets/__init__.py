from torch import nn


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        return self.body(x)


class Mixer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.mix = nn.MultiheadAttention(width, 8, batch_first=True)

    def forward(self, x):
        return self.mix(x, x, x)[0]


NETWORKS = {"mlp": MLP, "mixer": Mixer}
