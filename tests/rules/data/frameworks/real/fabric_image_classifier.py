# Held-out shape of Lightning-AI/pytorch-lightning examples/fabric/image_classifier/train_fabric.py
# (Apache-2.0): condensed and rewritten here, not the original text. A hand-written loop driven
# by Fabric: setup, setup_dataloaders, fabric.backward.
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms as T
from lightning.fabric import Fabric, seed_everything
from torch.optim.lr_scheduler import StepLR
from torchvision.datasets import MNIST


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        return F.log_softmax(self.fc2(F.relu(self.fc1(torch.flatten(x, 1)))), dim=1)


def run(hparams):
    fabric = Fabric(accelerator=hparams.accelerator)
    seed_everything(hparams.seed)
    transform = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])
    train_dataset = MNIST("data", download=True, train=True, transform=transform)
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=hparams.batch_size)
    train_loader = fabric.setup_dataloaders(train_loader)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=hparams.lr)
    model, optimizer = fabric.setup(model, optimizer)
    scheduler = StepLR(optimizer, step_size=1, gamma=hparams.gamma)
    for epoch in range(1, hparams.epochs + 1):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            fabric.backward(loss)
            optimizer.step()
            if batch_idx % hparams.log_interval == 0:
                print(f"Train Epoch: {epoch} [{batch_idx}]\tLoss: {loss.item():.6f}")
        scheduler.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--accelerator", default="auto")
    run(parser.parse_args())
