import torch


class Replay:
    def __init__(self, device, size=100_000):
        self.obs = torch.randn(size, 8, device=device)
        self.targets = torch.randn(size, 1, device=device)

    def sample(self, n):
        idx = torch.randint(0, len(self.obs), (n,), device=self.obs.device)
        return self.obs[idx]

    def sample_with_targets(self, n):
        idx = torch.randint(0, len(self.obs), (n,), device=self.obs.device)
        return self.obs[idx], self.targets[idx]
