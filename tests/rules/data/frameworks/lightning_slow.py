"""A small convolutional classifier trained by Lightning on every slow default, under DDP.

Expected rule codes (--select ALL): GP106, GP201, GP202, GP301, GP302, GP303, GP304, GP305, GP502, GP505
"""
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitConvNet(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(16, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)

    def train_dataloader(self):
        data = TensorDataset(torch.randn(256, 3, 16, 16), torch.randint(0, 10, (256,)))
        return DataLoader(data, batch_size=32, shuffle=True)


model = LitConvNet()
trainer = L.Trainer(max_epochs=2, accelerator="gpu", devices=2, strategy="ddp_find_unused_parameters_true")
trainer.fit(model)
