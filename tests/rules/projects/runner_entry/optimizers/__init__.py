import torch.optim as optim


def get_optimizer(args, parameters):
    if getattr(args, "optimizer", "adam") == "sgd":
        return optim.SGD(parameters, lr=args.lr, momentum=0.9)
    return optim.Adam(parameters, lr=args.lr, betas=(0.9, 0.999))
