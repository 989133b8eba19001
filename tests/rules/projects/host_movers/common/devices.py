"""Device helpers shared by the training scripts."""
import torch


def cuda(x):
    """The project's `.cuda()` that also runs without a GPU."""
    return x.cuda() if torch.cuda.is_available() else x


def put(sample, device):
    """Moves a tensor, or every tensor of a dict/list, to `device`."""
    if torch.is_tensor(sample):
        return sample.to(device)
    if isinstance(sample, dict):
        return {k: put(v, device) for k, v in sample.items()}
    if isinstance(sample, (list, tuple)):
        return [put(v, device) for v in sample]
    return sample


def scaled(x, factor):
    """Not a move: computes on what it is handed."""
    return x * factor
