import torch


class BaseTranslator:
    def __init__(self, opt):
        self.opt = opt
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def feed(self, batch):
        pass

    def train_step(self):
        pass
