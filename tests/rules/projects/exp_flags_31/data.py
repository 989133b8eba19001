import torch
from torch.utils.data import Dataset


class WindowDataset(Dataset):
    def __init__(self, horizon, length=20000, channels=7):
        self.series = torch.randn(length, channels).cumsum(0)
        self.horizon = horizon

    def __len__(self):
        return len(self.series) - 2 * self.horizon

    def __getitem__(self, i):
        return self.series[i:i + self.horizon], self.series[i + self.horizon:i + 2 * self.horizon]
