import torch
from torch import optim

from model import GraphNet


class Trainer:
    def __init__(self, device, num_nodes, lrate=1e-3):
        self.model = GraphNet(device, num_nodes)
        self.model.to(device)
        self.optimizer = optim.Adam(self.model.parameters(), lr=lrate)

    def train(self, x, y):
        self.model.train()
        self.optimizer.zero_grad()
        loss = torch.nn.functional.l1_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss
