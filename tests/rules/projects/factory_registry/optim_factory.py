"""Builds the optimizer from the command line's --opt."""
from torch import optim


def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=()):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def create_optimizer(args, model):
    parameters = param_groups_weight_decay(model, args.weight_decay)
    opt_args = dict(lr=args.lr, weight_decay=0.0)
    opt_name = args.opt.lower()
    if opt_name == "sgd":
        optimizer = optim.SGD(parameters, momentum=args.momentum, nesterov=True, **opt_args)
    elif opt_name == "adamw":
        optimizer = optim.AdamW(parameters, **opt_args)
    else:
        raise ValueError(f"unknown optimizer {args.opt}")
    return optimizer
