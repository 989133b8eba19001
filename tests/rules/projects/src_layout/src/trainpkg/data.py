import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loader():
    data = TensorDataset(torch.randn(4096, 512), torch.randint(0, 10, (4096,)))
    return DataLoader(data, batch_size=64, shuffle=True, num_workers=4, pin_memory=True,
                      persistent_workers=True)
