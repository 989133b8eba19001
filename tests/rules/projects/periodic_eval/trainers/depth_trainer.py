import torch.nn.functional as F

from .base_trainer import BaseTrainer
from .losses import checked_l1


class DepthTrainer(BaseTrainer):
    def train_on_batch(self, batch):
        x = batch["image"].to(self.device, non_blocking=True)
        y = batch["depth"].to(self.device, non_blocking=True)
        loss = checked_l1(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss

    def validate_on_batch(self, batch):
        x = batch["image"].to(self.device, non_blocking=True)
        y = batch["depth"].to(self.device, non_blocking=True)
        self.val_losses.append(checked_l1(self.model(x), y).item())  # every validation batch: guarded

    def test_on_batch(self, batch):
        x = batch["image"].to(self.device, non_blocking=True)
        y = batch["depth"].to(self.device, non_blocking=True)
        self.test_losses.append(F.l1_loss(self.model(x), y).item())  # every test batch, every epoch
