import numpy as np
import torch


class ReplayBuffer:
    def __init__(self, size, obs_dim, device):
        self.obs = np.zeros((size, obs_dim), dtype=np.float32)
        self.rew = np.zeros((size, 1), dtype=np.float32)
        self.device = device
        self.n = 0

    def sample(self, batch_size):
        idx = np.random.randint(0, self.n, size=batch_size)
        obs = torch.tensor(self.obs[idx]).to(self.device)
        rew = torch.tensor(self.rew[idx]).to(self.device)
        return obs, rew


class EpisodeBuffer:
    def __init__(self):
        self.episodes = []

    def sample(self, batch_size, seq_len=1):
        return [e[-seq_len:] for e in self.episodes[-batch_size:]]
