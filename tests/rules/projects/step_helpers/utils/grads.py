import math
import time

import torch


def clip_by_value(parameters, limit):
    """Called every training step; reads each gradient's norm on the host."""
    norms = []
    for p in parameters:
        if p.grad is None:
            continue
        norms.append(p.grad.norm().item())
        p.grad.clamp_(-limit, limit)
    return math.sqrt(sum(n * n for n in norms))


def grad_report(named_parameters, step):
    """Called only every 200 steps: its reads are rare."""
    for name, p in named_parameters:
        if p.grad is not None:
            print(f"{step} {name} {p.grad.norm().item():.3e}")


def summarize_epoch(losses, epoch):
    """Called once per epoch, after the loop."""
    mean = torch.stack(losses).mean().item()
    print(f"epoch {epoch}: {mean:.4f}")
    return mean


def timed(closure, sync=True):
    """Called every training step: the switch is on unless a caller turns it off."""
    start = time.perf_counter()
    out = closure()
    if sync:
        torch.cuda.synchronize()
    return out, time.perf_counter() - start
