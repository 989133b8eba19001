import torch
from torch import nn

from .base import BaseTranslator


class CycleTranslator(BaseTranslator):
    def __init__(self, opt):
        super().__init__(opt)
        self.g_ab = nn.Conv2d(3, 3, 3, padding=1).to(self.device)
        self.g_ba = nn.Conv2d(3, 3, 3, padding=1).to(self.device)
        self.g_ab.compile()
        self.g_ba.compile()
        self.opt_g = torch.optim.Adam([*self.g_ab.parameters(), *self.g_ba.parameters()], lr=opt.lr, fused=True)

    def feed(self, batch):
        self.a = batch["src"].to(self.device, non_blocking=True)

    def train_step(self):
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            loss = (self.g_ba(self.g_ab(self.a)) - self.a).abs().mean()
        self.opt_g.zero_grad()
        loss.backward()
        self.opt_g.step()
