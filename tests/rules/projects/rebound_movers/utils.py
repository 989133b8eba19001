import torch
from torch.autograd import Variable


def tensor2var(x, grad=False):
    if torch.cuda.is_available():
        x = x.cuda()
    return Variable(x, requires_grad=grad)


def to_device(batch, device):
    if device.type == "cuda":
        batch = batch.to(device)
    return batch


def denorm(x):
    out = (x + 1) / 2
    return out.clamp_(0, 1)
