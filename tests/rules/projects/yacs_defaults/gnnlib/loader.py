import torch
from torch.utils.data import DataLoader

from gnnlib.config import cfg


def create_loaders(train_set, val_set):
    train = DataLoader(train_set, batch_size=cfg.train.batch_size, shuffle=True, num_workers=cfg.num_workers,
                       pin_memory=cfg.pin_memory)
    val = DataLoader(val_set, batch_size=cfg.train.batch_size, num_workers=cfg.prefetch_workers,
                     pin_memory=True, persistent_workers=True)
    return train, val
