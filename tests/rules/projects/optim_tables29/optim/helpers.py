import torch


def make(net, spec, **overrides):
    """The optimizer a run's spec names, over the net's parameters."""
    cls = getattr(torch.optim, spec["kind"])
    kwargs = {k: v for k, v in spec.items() if k != "kind"}
    kwargs.update(overrides)
    return cls(net.parameters(), **kwargs)
