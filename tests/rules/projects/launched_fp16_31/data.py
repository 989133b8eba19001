import torch
from torch.utils.data import DataLoader, TensorDataset


def image_loader(path, batch_size):
    images = torch.load(path)
    return DataLoader(TensorDataset(images), batch_size=batch_size, shuffle=True, num_workers=4, pin_memory=True,
                      persistent_workers=True)
