"""A scalar log that accepts tensors or numbers: each tensor is read on the host when added."""
import torch


class ScalarLog:
    def __init__(self, window=20):
        self.window = window
        self.history = {}

    def add(self, *values, **named):
        for v in values:
            self.history.setdefault("value", []).append(v.detach().cpu().item() if torch.is_tensor(v) else v)
        for key, v in named.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            self.history.setdefault(key, []).append(v)

    def summary(self):
        return {k: sum(v[-self.window:]) / len(v[-self.window:]) for k, v in self.history.items()}


class Averager:
    def __init__(self):
        self.total, self.n = 0.0, 0

    def update(self, value, n=1):
        self.total += value * n
        self.n += n
