"""Reduction helpers that put the value they are handed (a Python number) on the GPU, reduce it
across ranks and read it back: each call waits for the GPU, whatever it was handed."""
import torch
import torch.distributed as dist


def world_size():
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def all_reduce_mean(x):
    n = world_size()
    if n > 1:
        t = torch.tensor(x).cuda()
        dist.all_reduce(t)
        t /= n
        return t.item()
    return x


def reduce_counts(correct, total, device):
    t = torch.tensor([correct, total], dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(t)
    return t.tolist()


class Averager:
    def __init__(self, device):
        self.device = device

    def mean(self, value):
        t = torch.as_tensor(value).to(self.device)
        dist.all_reduce(t)
        return float(t) / world_size()


def host_sum(values):
    t = torch.tensor(values).to("cpu")
    return t.sum().item()
