import torch


def make_by_kind(net, kind, lr, **extra):
    """Explicit branches for the fused-capable classes; any other torch.optim class by name last."""
    if kind == "adam":
        return torch.optim.Adam(net.parameters(), lr=lr, fused=True)
    elif kind == "adamw":
        return torch.optim.AdamW(net.parameters(), lr=lr, fused=True)
    elif kind == "sgd":
        return torch.optim.SGD(net.parameters(), lr=lr, fused=True)
    elif hasattr(torch.optim, kind):
        return getattr(torch.optim, kind)(net.parameters(), lr=lr, **extra)
    raise ValueError(kind)


def make_momentum(net, spec):
    if spec.kind == "SGD":
        return getattr(torch.optim, spec.kind)(net.parameters(), lr=spec.lr, momentum=0.9)
    return getattr(torch.optim, spec.kind)(net.parameters(), lr=spec.lr)
