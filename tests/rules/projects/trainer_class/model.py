import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class GPTConfig:
    vocab_size: int = 50304
    n_embd: int = 768
    n_layer: int = 12
    max_iters: int = 1000
    lr: float = 6e-4
    weight_decay: float = 0.1


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.blocks = nn.ModuleList(nn.Linear(config.n_embd, config.n_embd) for _ in range(config.n_layer))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, idx, targets=None):
        x = self.wte(idx)
        for block in self.blocks:
            x = x + F.gelu(block(x))
        logits = self.lm_head(x)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss
