import torch.nn as nn


class PatchEmbedding(nn.Module):
    """Cuts the image into non-overlapping patches: one strided convolution, kernel == stride."""

    def __init__(self, patch, chans, width):
        super().__init__()
        self.to_tokens = nn.Conv2d(chans, width, kernel_size=patch, stride=patch)

    def forward(self, images):
        return self.to_tokens(images).flatten(2).transpose(1, 2)
