import random

import numpy as np
import torch


class SamplerBase:
    """Samples training triples from dicts held in memory; no DataLoader."""

    def __init__(self, user_dict, n_items):
        self.user_dict = user_dict
        self.n_items = n_items

    def sample_neg(self, u):
        while True:
            j = random.randrange(self.n_items)
            if j not in self.user_dict[u]:
                return j

    def generate_pairs(self, batch_size):
        users = random.sample(list(self.user_dict), batch_size)
        pos = [random.choice(self.user_dict[u]) for u in users]
        neg = [self.sample_neg(u) for u in users]
        users = torch.LongTensor(users)
        pos = torch.LongTensor(pos)
        neg = torch.LongTensor(neg)
        return users, pos, neg

    def feature_batch(self, idx):
        x = np.stack([np.ones(4) * i for i in idx])
        return {"x": torch.from_numpy(x).float(), "y": torch.tensor(idx)}

    def on_device_batch(self, batch_size, device):
        users = torch.randint(0, 10, (batch_size,), device=device)
        return users, users
