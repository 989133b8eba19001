import torch
from torch import nn, optim

from runs.base import Experiment


class ForecastExperiment(Experiment):
    def make_model(self):
        net = self.registry[self.cfg.arch](self.cfg).float()
        if self.cfg.multi_gpu:
            net = nn.DataParallel(net)
        return net

    def fit(self, loader):
        optimizer = optim.Adam(self.model.parameters(), lr=self.cfg.lr)
        for x, y in loader:
            x = x.float().to(self.device, non_blocking=True)
            y = y.float().to(self.device, non_blocking=True)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            optimizer.step()
