# Held-out shape of the Lightning "CIFAR10 ResNet" tutorial (a LightningDataModule with worker
# loaders, a convolutional model, 16-bit mixed precision; Apache-2.0): condensed and rewritten
# here, not the original text.
import lightning.pytorch as pl
import torch
import torch.nn.functional as F
import torchvision
from torch.optim.lr_scheduler import OneCycleLR
from torch.utils.data import DataLoader
from torchvision import transforms

NUM_WORKERS = 4


class CIFARData(pl.LightningDataModule):
    def __init__(self, batch_size: int = 256) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.tf = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])

    def setup(self, stage=None):
        self.train = torchvision.datasets.CIFAR10("data", train=True, download=True, transform=self.tf)
        self.test = torchvision.datasets.CIFAR10("data", train=False, download=True, transform=transforms.ToTensor())

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True, num_workers=NUM_WORKERS)

    def val_dataloader(self):
        return DataLoader(self.test, batch_size=self.batch_size, num_workers=NUM_WORKERS)


class LitResnet(pl.LightningModule):
    def __init__(self, lr=0.05):
        super().__init__()
        self.save_hyperparameters()
        self.model = torchvision.models.resnet18(num_classes=10)
        self.model.conv1 = torch.nn.Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)

    def forward(self, x):
        return F.log_softmax(self.model(x), dim=1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.nll_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9, weight_decay=5e-4)
        scheduler = OneCycleLR(optimizer, 0.1, epochs=30, steps_per_epoch=196)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


if __name__ == "__main__":
    trainer = pl.Trainer(max_epochs=30, accelerator="auto", devices=1, precision="16-mixed")
    trainer.fit(LitResnet(lr=0.05), datamodule=CIFARData())
