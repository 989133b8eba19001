import torch
import torch.nn.functional as F


def fit_one_epoch(model_train, optimizer, loader, epoch, cuda, fp16, scaler):
    model_train.train()
    for images, targets in loader:
        if cuda:
            images, targets = images.cuda(non_blocking=True), targets.cuda(non_blocking=True)
        optimizer.zero_grad()
        if not fp16:
            loss = F.cross_entropy(model_train(images), targets)
            loss.backward()
            optimizer.step()
        else:
            from torch.cuda.amp import autocast
            with autocast():
                loss = F.cross_entropy(model_train(images), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
