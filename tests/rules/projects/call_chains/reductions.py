import torch


def masked_mean(values, mask):
    total = (values * mask).sum()
    mean = total / mask.sum().clamp(min=1)
    if not torch.isfinite(mean):
        raise FloatingPointError("the loss is not finite")
    return mean
