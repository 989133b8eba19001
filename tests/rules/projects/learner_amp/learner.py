"""A learner that already trains in bfloat16 and compiles its network: nothing to report at the entry."""
import torch
from torch import nn


class MixedPrecisionLearner:
    def __init__(self, device):
        self.device = device
        self.net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 3, 3, padding=1))
        self.net.to(device)
        self.net.compile()
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=1e-3, fused=True)

    def train_on_batch(self, x, y):
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
            loss = nn.functional.l1_loss(self.net(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()
