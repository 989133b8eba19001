import torch
from torch import nn

from . import register
from .base import Learner


class SmallUNet(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.down = nn.Conv2d(3, ch, 3, padding=1)
        self.up = nn.Conv2d(ch, 3, 3, padding=1)

    def forward(self, x):
        return self.up(torch.relu(self.down(x)))


@register("denoise")
class DenoiseLearner(Learner):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.device = torch.device(cfg["device"])
        self.net = SmallUNet().to(self.device)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=cfg["lr"], fused=True)

    def learn(self, batch):
        noisy, clean = (t.to(self.device, non_blocking=True) for t in batch)
        loss = nn.functional.mse_loss(self.net(noisy), clean)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()
