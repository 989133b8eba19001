import torch

from utils import dist as udist
from utils.dist import Averager, all_reduce_mean


def train_one_epoch(model, loader, optimizer, device, log_every=50):
    averager = Averager(device)
    model.train()
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = all_reduce_mean(loss.item())
        acc = averager.mean(0.0)
        seen = udist.host_sum([len(y)])
        if step % log_every == 0:
            correct, total = udist.reduce_counts(1, len(y), device)
            print(step, loss_value, acc, seen, correct / total)
