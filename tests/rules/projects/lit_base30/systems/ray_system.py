import torch
import torch.nn.functional as F
from torch import nn

from .base import BaseSystem


class RaySystem(BaseSystem):
    def __init__(self, config):
        super().__init__(config)
        self.field = nn.Sequential(nn.Linear(63, 256), nn.ReLU(), nn.Linear(256, 4))
        self.num_rays = config["num_rays"]

    def forward(self, rays):
        return self.field(rays)

    def training_step(self, batch, batch_idx):
        out = self(batch["rays"][: self.num_rays])
        loss = F.mse_loss(out[:, :3], batch["rgb"][: self.num_rays])
        alive = (out[:, 3] > 0).sum().item()
        self.num_rays = min(int(self.num_rays * 4096 / max(alive, 1)), 65536)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        out = self(batch["rays"])
        psnr = -10 * torch.log10(F.mse_loss(out[:, :3], batch["rgb"]))
        self.log("val/psnr", psnr.item())
        return psnr
