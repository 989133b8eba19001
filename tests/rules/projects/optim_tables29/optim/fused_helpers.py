import torch


def make_fused(net, spec, **overrides):
    cls = getattr(torch.optim, spec["kind"])
    kwargs = {k: v for k, v in spec.items() if k != "kind"}
    kwargs.setdefault("fused", torch.cuda.is_available())
    return cls(net.parameters(), **kwargs, **overrides)
