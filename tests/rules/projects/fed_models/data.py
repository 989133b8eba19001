"""Loaders built with the device in hand (only to decide pinning): their batches stay on the host."""
from torch.utils.data import DataLoader


def make_loaders(train_set, val_set, device):
    pin = device.type == "cuda"
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=pin,
                              persistent_workers=True)
    val_loader = DataLoader(val_set, batch_size=64, num_workers=4, pin_memory=pin, persistent_workers=True)
    return train_loader, val_loader
