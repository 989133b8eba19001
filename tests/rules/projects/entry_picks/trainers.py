import torch
from torch import nn


class PairTrainer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gen = nn.Sequential(nn.Conv2d(3, 64, 7, padding=3), nn.ReLU(), nn.Conv2d(64, 3, 7, padding=3))
        self.dis = nn.Sequential(nn.Conv2d(3, 64, 4, stride=2), nn.LeakyReLU(0.2), nn.Conv2d(64, 1, 4))
        self.gen_opt = torch.optim.Adam(self.gen.parameters(), lr=config["lr"])
        self.dis_opt = torch.optim.Adam(self.dis.parameters(), lr=config["lr"])

    def gen_update(self, a, b):
        self.gen_opt.zero_grad()
        loss = ((self.dis(self.gen(a)) - 1) ** 2).mean() + (self.gen(a) - b).abs().mean()
        loss.backward()
        self.gen_opt.step()

    def dis_update(self, a, b):
        self.dis_opt.zero_grad()
        loss = (self.dis(self.gen(a).detach()) ** 2).mean() + ((self.dis(b) - 1) ** 2).mean()
        loss.backward()
        self.dis_opt.step()


class SharedTrainer(PairTrainer):
    pass
