import os

import torch
from PIL import Image
from torchvision import transforms


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root):
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root))
        self.transform = transforms.Compose([transforms.RandomCrop(256), transforms.ToTensor()])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.transform(Image.open(self.paths[i]).convert("RGB"))
