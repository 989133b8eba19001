from torch import nn

from ..base import TabularModel


class FieldConv(TabularModel):
    """Convolves over a fixed number of fields."""

    def __init__(self, fields, device="cpu"):
        super().__init__(device)
        self.conv = nn.Sequential(nn.Conv1d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv1d(16, 1, 3, padding=1)).to(device)

    def forward(self, x):
        return self.conv(x.unsqueeze(1)).mean(dim=(1, 2))
