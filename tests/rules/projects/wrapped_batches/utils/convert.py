"""Conversions shared by the algorithms: numpy in, a host tensor out (or the tensor as it is)."""
import numpy as np
import torch


def as_torch(value):
    out = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
    return out


def flat(value):
    return value.reshape(-1, *value.shape[2:])
