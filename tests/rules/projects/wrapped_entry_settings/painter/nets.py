import torch.nn as nn


class Inpainter(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.encode = nn.Sequential(nn.Conv2d(4, width, 3, padding=1), nn.ReLU())
        self.decode = nn.Conv2d(width, 3, 3, padding=1)

    def forward(self, image, mask):
        return self.decode(self.encode(torch_cat(image, mask)))


def torch_cat(image, mask):
    import torch
    return torch.cat([image, mask], dim=1)
