"""Helpers for a run on several processes."""
import torch.distributed as dist


def all_reduce_mean(x):
    world = dist.get_world_size() if dist.is_initialized() else 1
    if world > 1:
        dist.all_reduce(x)
        x = x / world
    return x
