import torch
from torch import nn


class FrameGenerator(nn.Module):
    def __init__(self, channels=3, width=64):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(channels * 2, width, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(width, channels, 3, padding=1))

    def forward(self, prev, label):
        return torch.tanh(self.body(torch.cat([prev, label], dim=1)))


def create_model(opt):
    model = FrameGenerator()
    if opt.fp16:
        from apex import amp
        model = amp.initialize(model, opt_level="O1")
    return model.cuda()
