from torch.utils.data import DataLoader, SubsetRandomSampler

from .folder import ImageFolder


def split_loaders(root, batch_size=64, val_ratio=0.1, num_workers=1, pin_memory=True):
    dataset = ImageFolder(root)
    n_val = int(len(dataset) * val_ratio)
    indices = list(range(len(dataset)))
    train_loader = DataLoader(dataset, batch_size=batch_size, sampler=SubsetRandomSampler(indices[n_val:]),
                              num_workers=num_workers, pin_memory=pin_memory, persistent_workers=num_workers > 0)
    val_loader = DataLoader(dataset, batch_size=batch_size, sampler=SubsetRandomSampler(indices[:n_val]),
                            num_workers=num_workers, pin_memory=pin_memory, persistent_workers=num_workers > 0)
    return train_loader, val_loader
