import numpy as np
from torch.utils.data import Dataset


class SpectrogramSet(Dataset):
    def __init__(self, split):
        self.items = np.load(f"{split}.npy", allow_pickle=True)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def pad_numpy(items):
    """Returns numpy arrays: the batch is turned into tensors by the training code."""
    longest = max(len(m) for m, _ in items)
    mels = np.zeros((len(items), longest, 80), dtype=np.float32)
    audio = np.zeros((len(items), longest * 256), dtype=np.float32)
    lengths = np.array([len(m) for m, _ in items])
    for i, (m, a) in enumerate(items):
        mels[i, :len(m)] = m
        audio[i, :len(a)] = a
    return mels, audio, lengths
