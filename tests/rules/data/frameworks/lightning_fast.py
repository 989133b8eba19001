"""The same Lightning module with the fast settings.

Expected rule codes (--select ALL): none
"""
import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_float32_matmul_precision("high")


class LitConvNet(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(16, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3, fused=True)

    def train_dataloader(self):
        data = TensorDataset(torch.randn(256, 3, 16, 16), torch.randint(0, 10, (256,)))
        return DataLoader(data, batch_size=32, shuffle=True, num_workers=4, pin_memory=True,
                          persistent_workers=True)


model = LitConvNet()
model.compile()
trainer = L.Trainer(max_epochs=2, accelerator="gpu", devices=2, precision="bf16-mixed", benchmark=True,
                    strategy=DDPStrategy(gradient_as_bucket_view=True))
trainer.fit(model)
