import torch
import numpy as np

FloatTensor = torch.FloatTensor
LongTensor = torch.LongTensor


def to_device(device, *modules):
    return [m.to(device) for m in modules]
