import torch
from torch.utils.data import DataLoader


def construct_loaders(args, train_set, val_set):
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              num_workers=args.num_dataloader_workers, pin_memory=args.pin_memory)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, num_workers=args.val_workers,
                            pin_memory=True, persistent_workers=True)
    return train_loader, val_loader
