import torch

from tools.metrics import Averager, ScalarLog


def detection_losses(pred, target):
    return {"box": (pred - target).abs().mean(), "score": pred.sigmoid().mean()}


def train_one_epoch(model, loader, optimizer, device, epoch):
    model.train()
    log = ScalarLog()
    seconds = Averager()
    for images, target in loader:
        images, target = images.to(device, non_blocking=True), target.to(device, non_blocking=True)
        loss_parts = detection_losses(model(images), target)
        total = sum(loss_parts.values())
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        optimizer.step()
        log.add(**loss_parts)
        log.add(total)
        log.add(lr=optimizer.param_groups[0]["lr"], epoch=epoch)
        seconds.update(0.1)
    return log.summary()
