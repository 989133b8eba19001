# Held-out shape of Lightning-AI/pytorch-lightning examples/pytorch/basics/autoencoder.py
# (3adb0454b043adf8b3ce4d4fc389b329db75dc1d, Apache-2.0): condensed and rewritten here, not the
# original text. LightningCLI builds the Trainer from the command line or a YAML config.
import torch
import torch.nn.functional as F
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI
from torch import nn
from torch.utils.data import DataLoader, random_split
from torchvision import transforms
from torchvision.datasets import MNIST


class LitAutoEncoder(LightningModule):
    def __init__(self, hidden_dim: int = 64, learning_rate: float = 1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = nn.Sequential(nn.Linear(28 * 28, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 3))
        self.decoder = nn.Sequential(nn.Linear(3, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 28 * 28))

    def training_step(self, batch, batch_idx):
        x, _ = batch
        x = x.view(x.size(0), -1)
        return F.mse_loss(self.decoder(self.encoder(x)), x)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.learning_rate)


class MyDataModule(LightningDataModule):
    def __init__(self, batch_size: int = 32):
        super().__init__()
        dataset = MNIST("data", train=True, download=True, transform=transforms.ToTensor())
        self.mnist_train, self.mnist_val = random_split(dataset, [55000, 5000])
        self.batch_size = batch_size

    def train_dataloader(self):
        return DataLoader(self.mnist_train, batch_size=self.batch_size)


def cli_main():
    LightningCLI(LitAutoEncoder, MyDataModule, seed_everything_default=1234, save_config_kwargs={"overwrite": True})


if __name__ == "__main__":
    cli_main()
