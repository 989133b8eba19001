# Held-out shape of Lightning-AI/pytorch-lightning examples/pytorch/domain_templates/imagenet.py
# (600329364b9b16514f4a6f69eda685c337b40c91, Apache-2.0): condensed and rewritten here, not the
# original text. LightningCLI with trainer_defaults (benchmark=True among them), a torchvision
# ResNet, loaders with workers from a constructor default, accuracy on the progress bar.
import os

import torch
import torch.nn.functional as F
import torch.optim as optim
import torch.optim.lr_scheduler as lr_scheduler
import torch.utils.data
import torchvision.datasets as datasets
import torchvision.transforms as transforms
from lightning.pytorch import LightningModule
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI
from torchvision.models import get_model


class ImageNetLightningModel(LightningModule):
    def __init__(self, data_path: str, arch: str = "resnet18", lr: float = 0.1, momentum: float = 0.9,
                 weight_decay: float = 1e-4, batch_size: int = 256, workers: int = 4):
        super().__init__()
        self.save_hyperparameters()
        self.data_path = data_path
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.batch_size = batch_size
        self.workers = workers
        self.model = get_model(arch)

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        images, target = batch
        output = self.model(images)
        loss_train = F.cross_entropy(output, target)
        self.log("train_loss", loss_train)
        acc1 = (output.argmax(dim=1) == target).float().mean()
        self.log("train_acc1", acc1, prog_bar=True)
        return loss_train

    def configure_optimizers(self):
        optimizer = optim.SGD(self.parameters(), lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay)
        scheduler = lr_scheduler.LambdaLR(optimizer, lambda epoch: 0.1 ** (epoch // 30))
        return [optimizer], [scheduler]

    def setup(self, stage: str):
        normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        self.train_dataset = datasets.ImageFolder(
            os.path.join(self.data_path, "train"),
            transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor(), normalize]))

    def train_dataloader(self):
        return torch.utils.data.DataLoader(dataset=self.train_dataset, batch_size=self.batch_size, shuffle=True,
                                           num_workers=self.workers)


if __name__ == "__main__":
    LightningCLI(
        ImageNetLightningModel,
        trainer_defaults={
            "max_epochs": 90,
            "accelerator": "auto",
            "devices": 1,
            "logger": False,
            "benchmark": True,
            "callbacks": [ModelCheckpoint(monitor="val_acc1", mode="max")],
        },
        seed_everything_default=42,
        save_config_kwargs={"overwrite": True},
    )
