import torch

from .iter_base import IterTrainer


class GANTrainer(IterTrainer):
    def __init__(self, data, netG, netD, optG, optD, max_iters):
        super().__init__(data, max_iters)
        self.netG, self.netD, self.optG, self.optD = netG, netD, optG, optD

    def train_step(self, batch):
        real = batch.cuda()
        z = torch.randn(real.size(0), 128, device=real.device)
        d_loss = self.netD(self.netG(z).detach()).mean() - self.netD(real).mean()
        self.optD.zero_grad()
        d_loss.backward()
        self.optD.step()
        g_loss = -self.netD(self.netG(z)).mean()
        self.optG.zero_grad()
        g_loss.backward()
        self.optG.step()
        return {"d": d_loss.item(), "g": g_loss.detach()}
