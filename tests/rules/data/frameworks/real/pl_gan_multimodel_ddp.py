# Held-out shape of Lightning-AI/pytorch-lightning examples/pytorch/domain_templates/
# generative_adversarial_net_ddp.py (00727e85605ae808439e82c2cd36a279d9cb2b03, Apache-2.0):
# condensed and rewritten here, not the original text. Manual optimization, two Adam optimizers,
# `from lightning.pytorch.trainer import Trainer`, MultiModelDDPStrategy on four GPUs.
import math
from argparse import ArgumentParser, Namespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.core import LightningModule
from lightning.pytorch.demos.mnist_datamodule import MNISTDataModule
from lightning.pytorch.strategies.ddp import MultiModelDDPStrategy
from lightning.pytorch.trainer import Trainer


class Generator(nn.Module):
    def __init__(self, latent_dim: int = 100, img_shape: tuple = (1, 28, 28)):
        super().__init__()
        self.img_shape = img_shape
        self.model = nn.Sequential(nn.Linear(latent_dim, 256), nn.LeakyReLU(0.2, inplace=True),
                                   nn.Linear(256, int(math.prod(img_shape))), nn.Tanh())

    def forward(self, z):
        img = self.model(z)
        return img.view(img.size(0), *self.img_shape)


class Discriminator(nn.Module):
    def __init__(self, img_shape):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(int(math.prod(img_shape)), 256), nn.LeakyReLU(0.2, inplace=True),
                                   nn.Linear(256, 1))

    def forward(self, img):
        return self.model(img.view(img.size(0), -1))


class GAN(LightningModule):
    def __init__(self, img_shape: tuple = (1, 28, 28), lr: float = 0.0002, b1: float = 0.5, b2: float = 0.999,
                 latent_dim: int = 100):
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.generator = Generator(latent_dim=self.hparams.latent_dim, img_shape=img_shape)
        self.discriminator = Discriminator(img_shape=img_shape)

    def forward(self, z):
        return self.generator(z)

    @staticmethod
    def adversarial_loss(y_hat, y):
        return F.binary_cross_entropy_with_logits(y_hat, y)

    def training_step(self, batch):
        imgs, _ = batch
        opt_g, opt_d = self.optimizers()
        z = torch.randn(imgs.shape[0], self.hparams.latent_dim).type_as(imgs)
        valid = torch.ones(imgs.size(0), 1).type_as(imgs)
        self.toggle_optimizer(opt_g)
        g_loss = self.adversarial_loss(self.discriminator(self(z)), valid)
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()
        self.untoggle_optimizer(opt_g)
        self.toggle_optimizer(opt_d)
        fake = torch.zeros(imgs.size(0), 1).type_as(imgs)
        d_loss = (self.adversarial_loss(self.discriminator(imgs), valid) +
                  self.adversarial_loss(self.discriminator(self(z).detach()), fake)) / 2
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        self.untoggle_optimizer(opt_d)
        self.log_dict({"d_loss": d_loss, "g_loss": g_loss})

    def configure_optimizers(self):
        lr, b1, b2 = self.hparams.lr, self.hparams.b1, self.hparams.b2
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(b1, b2))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(b1, b2))
        return opt_g, opt_d


def main(args: Namespace) -> None:
    model = GAN(lr=args.lr, b1=args.b1, b2=args.b2, latent_dim=args.latent_dim)
    dm = MNISTDataModule()
    trainer = Trainer(accelerator="auto", devices=[0, 1, 2, 3], strategy=MultiModelDDPStrategy(), max_epochs=100)
    trainer.fit(model, dm)


if __name__ == "__main__":
    parser = ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--b1", type=float, default=0.5)
    parser.add_argument("--b2", type=float, default=0.999)
    parser.add_argument("--latent_dim", type=int, default=100)
    main(parser.parse_args())
