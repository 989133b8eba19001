import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loader(opt):
    pairs = TensorDataset(torch.randn(64, 3, 32, 32), torch.randn(64, 3, 32, 32))
    return DataLoader(pairs, batch_size=8, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True)
