"""Loader builders the scripts call: the settings they leave unset are reported where the
scripts iterate the loaders, naming these lines."""
from torch.utils.data import DataLoader


def make_loader(dataset, batch_size=64, workers=4, sampler=None, **extra):
    return (
        DataLoader(dataset, batch_sampler=sampler, num_workers=workers)
        if sampler is not None
        else DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, pin_memory=True, **extra)
    )


def eval_loader(dataset, batch_size):
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=2, pin_memory=True, persistent_workers=True)
    return loader


def serial_loader(dataset, workers=0):
    return DataLoader(dataset, batch_size=16, num_workers=workers, pin_memory=True)
