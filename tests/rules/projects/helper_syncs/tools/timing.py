"""Timing helpers: both wait for the GPU before reading the clock."""
import time

import torch


def gpu_fence():
    torch.cuda.synchronize()


def stamp(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()
