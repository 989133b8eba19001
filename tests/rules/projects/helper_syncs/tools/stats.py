"""Metric helpers a training engine calls on every step; each reads what it is handed on the host."""
import torch
import torch.distributed as dist


def mean_across_ranks(t):
    t = t.detach().clone()
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t)
        t /= dist.get_world_size()
    return t.item()


class Smoothed:
    def __init__(self, window=20):
        self.values = []
        self.window = window

    def add(self, value):
        self.values = (self.values + [float(value)])[-self.window:]

    @property
    def mean(self):
        return sum(self.values) / max(len(self.values), 1)


def ema_tracker(decay=0.99):
    state = {}

    def track(named):
        for key, value in named.items():
            state[key] = decay * state.get(key, float(value)) + (1 - decay) * float(value)
        return state

    return track


def count_correct(scores, labels):
    return int((scores.argmax(dim=1) == labels).sum())
