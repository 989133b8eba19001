import torch
from torch import nn

from .base import BaseTranslator


class PixTranslator(BaseTranslator):
    def __init__(self, opt):
        super().__init__(opt)
        self.gen = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 3, 3, padding=1)).to(self.device)
        self.gen.compile()
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=opt.lr, fused=True)

    def feed(self, batch):
        self.src = batch["src"].to(self.device, non_blocking=True)
        self.dst = batch["dst"].to(self.device, non_blocking=True)

    def train_step(self):
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            fake = self.gen(self.src)
            loss = (fake - self.dst).abs().mean()
        self.opt_g.zero_grad()
        loss.backward()
        self.opt_g.step()
