import numpy as np
import torch


class TokenLoader:
    """Random windows of a token file, as nanoGPT's get_batch reads them."""

    def __init__(self, path, batch_size, block_size):
        self.tokens = np.memmap(path, dtype=np.uint16, mode="r")
        self.batch_size, self.block_size = batch_size, block_size

    def next_batch(self):
        ix = torch.randint(len(self.tokens) - self.block_size, (self.batch_size,))
        x = torch.stack([torch.from_numpy(self.tokens[i:i + self.block_size].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(self.tokens[i + 1:i + 1 + self.block_size].astype(np.int64)) for i in ix])
        return x, y

    def __iter__(self):
        while True:
            yield self.next_batch()
