"""Losses the engine is handed as callables: no call of them is in sight of this module."""
import torch.nn.functional as F


def weighted_loss(pred, target, scale=1.0, seq_len=None):
    mask = target.ne(-1)
    n_valid = mask.sum().item()  # read on every training step
    loss = F.mse_loss(pred[mask], target[mask], reduction="sum") * scale / n_valid
    if seq_len is not None:
        span = int(seq_len)  # a length the caller keeps on the host: quiet
    stats = {"loss": loss.detach()}
    return loss, stats


class HeadLoss:
    def get_loss(self, preds, targets):
        cls_loss = self.cls_term(preds, targets)
        return cls_loss, {"cls": cls_loss.item()}  # read on every training step

    def cls_term(self, preds, targets):
        return F.cross_entropy(preds, targets)


def compute_accuracy(pred, target):
    # returns a loss-named value, so a loss root: its read is per step too
    correct = (pred.argmax(1) == target).float().mean().item()
    loss = 1.0 - correct
    return loss


def log_losses(losses):
    # a logging helper: no training loss, its cadence is the caller's
    return {k: v.item() for k, v in losses.items()}


def eval_loss(model, loader):
    total = 0.0
    for x, y in loader:
        total += F.mse_loss(model(x), y).item()
    return total
