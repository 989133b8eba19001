"""Logging helpers a training loop calls every step: each wraps a Python number in a legacy CPU
tensor and moves it to the GPU for a collective."""
import torch
import torch.distributed as dist


def reduce_scalar(value, device, op="mean"):
    buf = torch.Tensor([value])
    buf = buf.to(device)
    dist.all_reduce(buf)
    if op == "mean":
        buf /= dist.get_world_size()
    return buf


def gather_counts(counts, device):
    return torch.Tensor(len(counts), 2).to(device)
