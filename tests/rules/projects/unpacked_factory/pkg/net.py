import torch.nn as nn


class Grounder(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.attn = nn.MultiheadAttention(d, 8)

    def forward(self, x):
        return self.attn(self.proj(x), x, x)[0]


def span_loss(out, target):
    return (out - target).abs().mean()


def build_model(args):
    model = Grounder(args.dim)
    criterion = span_loss
    return model, criterion
