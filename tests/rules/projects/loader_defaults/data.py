import torch
from torch.utils.data import Dataset


class GraphFiles(Dataset):
    def __init__(self, name):
        self.paths = sorted(f"{name}/{i}.pt" for i in range(1000))

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return torch.load(self.paths[i])
