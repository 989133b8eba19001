# Held-out shape of the classic PyTorch Lightning MNIST tutorial script (LitMNIST with its own
# train_dataloader; Apache-2.0): condensed and rewritten here, not the original text.
# `import pytorch_lightning as pl`; loaders built in the module's hooks.
import os

import pytorch_lightning as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, random_split
from torchvision import transforms
from torchvision.datasets import MNIST

PATH_DATASETS = os.environ.get("PATH_DATASETS", ".")
BATCH_SIZE = 256 if torch.cuda.is_available() else 64


class LitMNIST(pl.LightningModule):
    def __init__(self, data_dir=PATH_DATASETS, hidden_size=64, learning_rate=2e-4):
        super().__init__()
        self.data_dir = data_dir
        self.learning_rate = learning_rate
        self.transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, hidden_size), nn.ReLU(), nn.Dropout(0.1),
                                   nn.Linear(hidden_size, 10))

    def forward(self, x):
        return F.log_softmax(self.model(x), dim=1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.nll_loss(self(x), y)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.nll_loss(logits, y)
        preds = torch.argmax(logits, dim=1)
        self.log("val_loss", loss, prog_bar=True)
        self.log("val_acc", (preds == y).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)

    def prepare_data(self):
        MNIST(self.data_dir, train=True, download=True)

    def setup(self, stage=None):
        full = MNIST(self.data_dir, train=True, transform=self.transform)
        self.mnist_train, self.mnist_val = random_split(full, [55000, 5000])

    def train_dataloader(self):
        return DataLoader(self.mnist_train, batch_size=BATCH_SIZE)

    def val_dataloader(self):
        return DataLoader(self.mnist_val, batch_size=BATCH_SIZE)


if __name__ == "__main__":
    model = LitMNIST()
    trainer = pl.Trainer(accelerator="auto", devices=1, max_epochs=3)
    trainer.fit(model)
