import torch
from torch.utils.data import DataLoader, TensorDataset


def create_dataset(batch_size):
    ds = TensorDataset(torch.randn(1024, 3, 32, 32), torch.randn(1024, 3, 32, 32))
    return DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=4, pin_memory=True,
                      persistent_workers=True)
