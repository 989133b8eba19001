from torch.optim import SGD, Adam, Adagrad, RMSprop

name_to_optim = {"sgd": SGD, "adam": Adam, "adagrad": Adagrad, "rmsprop": RMSprop}


def optimizer_class(settings):
    """The optimizer class the run's settings name."""
    if settings.get("optimizer") is None:
        return SGD
    return name_to_optim[settings["optimizer"]["name"]]


def lookup_optimizer(kind):
    return name_to_optim.get(kind)
