import torch


def train_one_epoch(model, criterion, loader, optimizer, device):
    model.train()
    for points, targets in loader:
        points = points.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        loss = criterion(model(points), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
