import torch


def train_one_epoch(model, criterion, loader, optimizer, device, loss_scaler=None, clip_grad=None):
    model.train()
    for images, targets in loader:
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = criterion(model(images), targets)
        optimizer.zero_grad(set_to_none=True)
        if loss_scaler is not None:
            loss_scaler(loss, optimizer, clip_grad=clip_grad, parameters=model.parameters())
        else:
            loss.backward()
            optimizer.step()
