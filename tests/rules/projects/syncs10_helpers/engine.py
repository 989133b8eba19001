"""A training epoch that logs to an optional TensorBoard logger (an enable switch, not a period),
and an evaluation with a project metric."""
import torch

from tools import AccuracyMetric, to_np


def train_one_epoch(model, loader, optimizer, device, log_writer=None):
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss_value = loss.item()
        if log_writer is not None:
            log_writer.update(loss=loss_value, head="loss")
            log_writer.update(grad_norm=grad_norm, head="opt")
            log_writer.set_step()
        history = to_np(grad_norm)


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    metric = AccuracyMetric()
    for image, target in loader:
        image, target = image.to(device, non_blocking=True), target.to(device, non_blocking=True)
        outputs = model(image)
        metric.update(outputs, target)
    return metric.get()
