import torch

from tools.stats import Smoothed, count_correct, ema_tracker, mean_across_ranks
from tools.timing import gpu_fence, stamp


def train_one_epoch(model, loader, optimizer, device):
    smooth = Smoothed()
    track = ema_tracker()
    correct = 0
    for images, labels in loader:
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        start = stamp(device)
        scores = model(images)
        loss = torch.nn.functional.cross_entropy(scores, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        gpu_fence()
        smooth.add(mean_across_ranks(loss))
        track({"loss": loss, "scale": scores.abs().mean()})
        correct += count_correct(scores, labels)
        stamp(torch.device("cpu"))
    return smooth.mean, correct
