"""One epoch: the step is a method of the training utility the entry hands in (its class is in a
module this one never imports)."""
import torch

from utils.utils import get_lr


def fit_one_epoch(model, train_util, optimizer, epoch, gen, cuda):
    total_loss = 0
    for iteration, batch in enumerate(gen):
        images, boxes = batch[0], batch[1]
        if cuda:
            images = images.cuda(non_blocking=True)
        total = train_util.train_step(images, boxes)
        total_loss += total.item()
    print(epoch, total_loss / (iteration + 1), get_lr(optimizer))
