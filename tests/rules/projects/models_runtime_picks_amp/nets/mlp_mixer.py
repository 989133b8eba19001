from torch import nn


class Mixer(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.mix = nn.Linear(3 * 32 * 32, classes)

    def forward(self, x):
        return self.mix(x.flatten(1))


def get_net(cfg):
    return Mixer(cfg.classes)
