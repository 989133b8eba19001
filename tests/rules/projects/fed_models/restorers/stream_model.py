"""A class that trains itself (its own optimizer, `adapt` runs the backward) through an input setter:
its copy is reported whoever calls it (serve.py feeds it from a queue of unknown origin), with the
unsafe fix only, since the input's type is not known here."""
import torch


class StreamModel:
    def __init__(self, net, device):
        self.net = net
        self.device = device
        self.optimizer = torch.optim.SGD(net.parameters(), lr=0.01)

    def feed_sample(self, sample):
        self.frames = sample.to(self.device)

    def adapt(self):
        self.optimizer.zero_grad()
        self.net(self.frames).mean().backward()
        self.optimizer.step()
