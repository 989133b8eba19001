"""One epoch of training with gradient accumulation, and the final evaluation."""
import torch
import torch.nn.functional as F

import misc


def train_one_epoch(model, loader, optimizer, device, update_freq):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    for it, (images, targets) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), targets) / update_freq
        loss.backward()
        if (it + 1) % update_freq == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return misc.all_reduce_mean(loss.detach())


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = torch.zeros((), device=device)
    for images, targets in loader:
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            correct += (model(images).argmax(1) == targets).sum()
    return correct
