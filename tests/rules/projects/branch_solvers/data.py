import torch
from torch.utils.data import DataLoader, Dataset


class PatchDataset(Dataset):
    def __init__(self, root, patch):
        self.root, self.patch = root, patch

    def __len__(self):
        return 800

    def __getitem__(self, i):
        return torch.rand(3, self.patch, self.patch), torch.rand(3, self.patch, self.patch)


def make_loader(dataset, *args, loader_cls=DataLoader, **kwargs):
    return loader_cls(dataset, *args, **kwargs)
