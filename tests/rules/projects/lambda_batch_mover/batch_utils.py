# A batch mover that applies a lambda to every tensor of a nested batch.
from collections.abc import Mapping, Sequence

import torch


def batch_apply(batch, fn):
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, Sequence):
        return [batch_apply(x, fn) for x in batch]
    if isinstance(batch, Mapping):
        return {k: batch_apply(v, fn) for k, v in batch.items()}
    raise NotImplementedError(type(batch))


def batch_to(batch, device):
    return batch_apply(batch, lambda x: x.to(device))
