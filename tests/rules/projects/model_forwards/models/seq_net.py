"""A sequence model: a positional encoding from ops/, a grid cached by the head, a momentum queue
kept as buffers, and per-call statistics read on the host."""
import torch
import torch.nn as nn

from layers.masks import CausalMask
from ops.geometry import sinusoid


class Head(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.grid = None

    def forward(self, x, lengths):
        if self.grid is None or self.grid.shape[0] != x.shape[1]:
            self.grid = torch.arange(x.shape[1]).to(x.device)
        longest = int(lengths.max())
        return self.proj(x[:, :longest]) + self.grid[:longest, None]


class SeqNet(nn.Module):
    def __init__(self, dim, queue_size=4096):
        super().__init__()
        self.head = Head(dim)
        self.queue_size = queue_size
        self.register_buffer("queue", torch.randn(dim, queue_size))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _enqueue(self, keys):
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + keys.shape[0]] = keys.T
        self.queue_ptr[0] = (ptr + keys.shape[0]) % self.queue_size

    def forward(self, x, lengths):
        pos = torch.arange(x.shape[1], device=x.device)
        x = x + sinusoid(pos, x.shape[-1])
        mask = CausalMask(x.shape[1], x.device).mask
        h = self.head(x.masked_fill(mask[..., :1], 0.0), lengths)
        logits = h.mean(1) @ self.queue
        labels = torch.zeros(x.shape[0], dtype=torch.long).cuda()
        self._enqueue(h.mean(1))
        stats = {"spread": torch.std(h, dim=0).mean().item()}
        return nn.functional.cross_entropy(logits, labels), stats

    def queue_fill(self):
        return int(self.queue_ptr)


def get_model(classes):
    return SeqNet(64)
