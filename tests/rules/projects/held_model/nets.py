import torch.nn as nn


class TemporalConvNet(nn.Module):
    def __init__(self, in_dim, hidden, out_dim):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(in_dim, hidden, (1, 2), dilation=2), nn.ReLU(),
                                  nn.Conv2d(hidden, hidden, (1, 2), dilation=4), nn.ReLU())
        self.head = nn.Linear(hidden, out_dim)

    def forward(self, x):
        return self.head(self.conv(x).mean(dim=(2, 3)))
