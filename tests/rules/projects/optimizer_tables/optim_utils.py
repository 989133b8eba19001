import torch
from torch import optim

from nets.lion import Lion

OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": optim.AdamW, "sgd": optim.SGD}
ANY_OPTIMIZER = {"adam": optim.Adam, "rmsprop": optim.RMSprop}
OWN_OPTIMIZERS = {"lion": Lion}
