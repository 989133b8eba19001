import torch


class WarmupOptim:
    """Adam with a warm-up learning rate, stepped by the training loop."""

    def __init__(self, model, lr, warmup):
        self._optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        self.warmup, self.steps, self.lr = warmup, 0, lr

    def step_and_update_lr(self):
        self.steps += 1
        for group in self._optimizer.param_groups:
            group["lr"] = self.lr * min(1.0, self.steps / self.warmup)
        self._optimizer.step()

    def zero_grad(self):
        self._optimizer.zero_grad()
