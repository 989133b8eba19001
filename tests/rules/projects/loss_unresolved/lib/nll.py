"""A loss registered by name elsewhere (no call in sight), reading through a helper of its module."""
import torch


def nll_loss(log_probs, target):
    picked = -log_probs.gather(1, target.unsqueeze(1))
    _check_finite(picked)
    return picked.mean()


def _check_finite(values):
    if values.isnan().any().item():  # read on every call of the loss
        raise ValueError("nan")


def smoothed_loss(log_probs, target):
    value = nll_loss(log_probs, target)
    return value


def summary(log_probs, target):
    # calls a loss itself: how often is this module's own business (no loss root for `score_loss`)
    return score_loss(log_probs, target)


def score_loss(log_probs, target):
    return log_probs.max().item()
