import pytorch_lightning as pl
import torch


class BaseSystem(pl.LightningModule):
    """What every system shares: the optimizer and the step that calls the subclass's loss."""

    def __init__(self, config):
        super().__init__()
        self.config = config

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.config["lr"], fused=True)

    def training_step(self, batch, batch_idx):
        raise NotImplementedError

    def validation_step(self, batch, batch_idx):
        raise NotImplementedError
