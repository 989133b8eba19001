from torch import nn


class Classifier(nn.Module):
    def __init__(self, dim=512, classes=400):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, classes))

    def forward(self, x):
        return self.body(x)
