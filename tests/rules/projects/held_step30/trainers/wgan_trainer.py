from nets.wgan import WGAN
from .base_trainer import BaseTrainer


class WGANTrainer(BaseTrainer):
    def build_model(self):
        self.model = WGAN(latent_dim=128)
