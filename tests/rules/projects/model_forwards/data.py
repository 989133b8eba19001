import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset
from torchvision import transforms


class Jitter(nn.Module):
    """A data transform written as a module: it runs in the loader's workers, on the host."""

    def forward(self, pts):
        scale = torch.rand(1).item() * 0.02
        return pts + torch.randn(pts.shape).to("cpu") * scale


class PointClouds(Dataset):
    def __init__(self, root):
        self.items = np.load(root + "/points.npy")
        self.aug = transforms.Compose([Jitter()])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.aug(torch.from_numpy(self.items[i])), 0
