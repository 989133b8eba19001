import torch.nn as nn

from .registry import register_model


class TinyViT(nn.Module):
    def __init__(self, dim=64, depth=2, num_classes=10):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, 4, stride=4)
        layer = nn.TransformerEncoderLayer(dim, 4, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        tokens = self.embed(x).flatten(2).transpose(1, 2)
        return self.head(self.blocks(tokens).mean(1))


@register_model
def vit_tiny(**kwargs):
    return TinyViT(**kwargs)
