import torch
from torch.utils.data import Dataset


class ClipSet(Dataset):
    def __init__(self, split):
        self.split = split

    def __len__(self):
        return 10000

    def __getitem__(self, i):
        return torch.randn(512), i % 400
