"""Moving nested batches: the project's one copy helper, without non_blocking."""
import torch


def move_to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: move_to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(move_to(v, device) for v in obj)
    return obj


def move_pinned(obj, device):
    if isinstance(obj, dict):
        return {k: move_pinned(v, device) for k, v in obj.items()}
    return obj.to(device, non_blocking=True)
