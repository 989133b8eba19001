import torch
from torch.utils.data import DataLoader

from .nets import Inpainter


class Solver:
    def __init__(self, root, device):
        self.device = device
        self.net = Inpainter().to(device)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=2e-4)
        self.loader = DataLoader(CropDataset(root), batch_size=16, shuffle=True, num_workers=4,
                                 pin_memory=True, persistent_workers=True)

    def train(self):
        for epoch in range(100):
            for image, mask in self.loader:
                image = image.to(self.device, non_blocking=True)
                mask = mask.to(self.device, non_blocking=True)
                loss = (self.net(image * (1 - mask), mask) - image).abs().mean()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()

    @torch.no_grad()
    def test(self):
        self.net.eval()
        for image, mask in self.loader:
            self.net(image.to(self.device), mask.to(self.device))


class CropDataset(torch.utils.data.Dataset):
    def __init__(self, root):
        self.files = sorted(root)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return torch.zeros(3, 64, 64), torch.zeros(1, 64, 64)
