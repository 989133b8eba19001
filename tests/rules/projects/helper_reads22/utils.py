"""Helpers the training loop (train.py) calls on every step. The `__main__` self-test at the bottom
builds CPU tensors only: the caller picks the device, this is no CPU-only program."""
import numpy as np
import torch


class Queue:
    def __init__(self, max_len=50):
        self.items = []
        self.max_len = max_len

    def add(self, item):
        self.items.insert(0, item)
        if len(self.items) > self.max_len:
            self.items.pop()

    def mean(self):
        return np.mean(self.items)

    def std(self):
        return np.std(self.items)


def gradient_clipping(flow, gradnorm_queue):
    max_grad_norm = 1.5 * gradnorm_queue.mean() + 2 * gradnorm_queue.std()
    grad_norm = torch.nn.utils.clip_grad_norm_(flow.parameters(), max_norm=max_grad_norm)
    if float(grad_norm) > max_grad_norm:
        gradnorm_queue.add(float(max_grad_norm))
    else:
        gradnorm_queue.add(float(grad_norm))
    return grad_norm


def clip_and_log(model, stats, max_norm=1.0):
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    stats["grad_norm"] = total.item()


if __name__ == "__main__":
    net = torch.nn.Linear(3, 3)
    net(torch.randn(2, 3)).sum().backward()
    q = Queue()
    q.add(1.0)
    print(gradient_clipping(net, q))
