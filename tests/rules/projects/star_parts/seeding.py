import random

import torch
from torch.backends import cudnn


def init_seeds(seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    if seed == 0:  # reproducible
        cudnn.benchmark, cudnn.deterministic = False, True
    else:  # fast
        cudnn.benchmark, cudnn.deterministic = True, False
