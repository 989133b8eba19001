import torch


class BaseModel:
    def __init__(self):
        self.device = torch.device("cuda")

    def train_on_batch(self, batch):
        raise NotImplementedError
