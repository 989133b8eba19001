import torch
from torch import nn


class TinyTransformer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(width, 4, batch_first=True)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.layer(x).mean(1))


class ConvNet(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv = nn.Conv1d(width, width, 3, padding=1)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x.transpose(1, 2))).mean(2))
