"""Optimizers by name: a table the factory looks its name up in (default "sgd")."""
import torch

SOLVERS = {"sgd": torch.optim.SGD, "rmsprop": torch.optim.RMSprop, "adamw": torch.optim.AdamW}


def build_optimizer(model, name="sgd", lr=0.1, weight_decay=5e-4):
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if n.endswith("bias") or p.ndim == 1 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return SOLVERS[name](groups, lr=lr)
