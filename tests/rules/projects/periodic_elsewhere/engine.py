"""Shared by two entries: finetune.py validates under a period, finetune_every.py after every epoch."""
import torch


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        correct += (model(x).argmax(-1) == y).sum().item()
    model.train()
    return correct
