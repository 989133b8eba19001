import torch

from nets.convs import DilatedConvNet
from nets.mixers import AttentionForecaster, TokenMixer


class Experiment:
    def __init__(self, cfg):
        self.cfg = cfg
        self.registry = {
            "mixer": TokenMixer,
            "attention": AttentionForecaster,
            "tcn": DilatedConvNet,
        }
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = self.make_model().to(self.device)

    def make_model(self):
        raise NotImplementedError
