import torch
import torch.nn.functional as F

from nets.unet import TinyUNet
from optimizers import get_optimizer


class Runner:
    def __init__(self, args, device):
        self.args, self.device = args, device

    def train(self):
        data = torch.randn(64, 3, 32, 32)
        loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
        model = TinyUNet(3).to(self.device)
        optimizer = get_optimizer(self.args, model.parameters())
        for epoch in range(self.args.epochs):
            for x in loader:
                x = x.to(self.device)
                noise = torch.randn_like(x)
                loss = F.mse_loss(model(x + noise), noise)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
