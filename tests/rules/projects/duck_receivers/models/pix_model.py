import torch
from torch import nn

from .base_model import BaseModel


class PixModel(BaseModel):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 8).to(self.device)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1, fused=True)

    def train_on_batch(self, batch):
        self.opt.zero_grad(set_to_none=True)
        loss = self.net(batch[0].to(self.device, non_blocking=True)).sum()
        loss.backward()
        self.opt.step()
        return {"loss": loss.detach()}
