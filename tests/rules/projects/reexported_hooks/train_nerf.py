import torch
import torch.nn.functional as F

import trainkit

device = torch.device("cuda")


class RayTrainer(trainkit.BaseTrainer):
    def losses(self, batch, train=True):
        rays = batch["rays"].to(device=device)
        target = batch["rgb"].to(device=device)
        pred = self.net(rays)
        loss = F.mse_loss(pred, target)
        stats = {"mse": loss.item()}
        if train:
            loss.backward()
        return stats

    def train_step(self, batch):
        return self.losses(batch, train=True)

    def log(self, stats):
        print(torch.cuda.max_memory_allocated(), stats)


if __name__ == "__main__":
    net = torch.nn.Linear(6, 3).to(device)
    RayTrainer(net, []).fit(10)
