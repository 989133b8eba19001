import torch
from torch.utils.data import DataLoader, Dataset


class _Forever:
    """Repeats a batch sampler without end."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        while True:
            for b in self.batches:
                yield b


class RepeatingLoader(DataLoader):
    """One iterator (and one set of workers) for the loader's whole life."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "batch_sampler", _Forever(self.batch_sampler))
        self.stream = super().__iter__()

    def __len__(self):
        return len(self.batch_sampler.batches)

    def __iter__(self):
        for _ in range(len(self)):
            yield next(self.stream)


class Tiles(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.randn(3, 64, 64), i % 10


def make_loader(n, batch_size, workers=6):
    return RepeatingLoader(Tiles(n), batch_size=batch_size, shuffle=True, num_workers=workers,
                           pin_memory=True)
