import torch
from torch import nn

from .base import BaseAgent


class GanAgent(BaseAgent):
    def __init__(self, opt):
        self.gen = nn.Sequential(nn.Linear(opt.z, 256), nn.ReLU(), nn.Linear(256, opt.out)).cuda()
        self.disc = nn.Sequential(nn.Linear(opt.out, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
        self.opt_g = torch.optim.Adam(self.gen.parameters(), 1e-4)
        self.opt_d = torch.optim.Adam(self.disc.parameters(), 1e-4)
        self.z = opt.z

    def feed(self, batch):
        self.real = batch.cuda()
        self.fake = self.gen(torch.randn(len(batch), self.z, device="cuda"))

    def _disc_loss(self):
        return self.disc(self.fake.detach()).mean() - self.disc(self.real).mean()

    def _disc_turn(self):
        self.opt_d.zero_grad()
        self._disc_loss().backward()
        self.opt_d.step()

    def _gen_turn(self):
        self.opt_g.zero_grad()
        (-self.disc(self.fake).mean()).backward()
        self.opt_g.step()

    def learn(self):
        self._disc_turn()
        self._gen_turn()
