import torch.nn as nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))

    def forward(self, x):
        return self.net(x)


MODELS = {"mlp": MLP}


def create_model(name):
    return MODELS[name]()
