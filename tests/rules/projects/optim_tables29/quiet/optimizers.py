from torch.optim import Adagrad, RMSprop

slow_table = {"adagrad": Adagrad, "rmsprop": RMSprop}


def get_slow(name):
    return slow_table[name]
