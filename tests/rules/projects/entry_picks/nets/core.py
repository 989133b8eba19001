import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, name="BaseModel"):
        super().__init__()
        self.name = name

    def save(self, path):
        torch.save(self.state_dict(), path)
