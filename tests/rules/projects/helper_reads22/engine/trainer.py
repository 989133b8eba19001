"""A trainer class whose token counter starts as the int 0 and becomes a device tensor in the step."""
import math

import torch


class Trainer:
    def __init__(self, config):
        self.config = config
        self.n_tokens = 0
        self.n_seen = 0

    def lr_multiplier(self):
        if self.n_tokens < self.config.warmup_tokens:
            return float(self.n_tokens) / max(1, self.config.warmup_tokens)
        return 0.5 * (1.0 + math.cos(math.pi * float(self.n_tokens - self.config.warmup_tokens)))

    def step(self, model, optimizer, x, y):
        logits, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        self.n_tokens += (y != self.config.pad_id).sum()
        self.n_seen += y.shape[0]
        for group in optimizer.param_groups:
            group["lr"] = self.config.lr * self.lr_multiplier()
        return loss
