"""Train and evaluate one epoch."""
import torch
import torch.nn.functional as F

from utils import zero_grad


def train_one_epoch(model, loader, optimizer, device, epoch):
    model.train()
    for images, targets in loader:
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        output = model(images)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        optimizer.step()
        zero_grad(model.parameters())


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = 0
    for images, targets in loader:
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        correct += (model(images).argmax(1) == targets).sum()
    return correct
