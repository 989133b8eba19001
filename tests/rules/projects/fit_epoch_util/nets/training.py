import torch
from torch import nn


class DetectorTrainer(nn.Module):
    def __init__(self, model, optimizer):
        super().__init__()
        self.model, self.optimizer = model, optimizer

    def train_step(self, images, boxes):
        self.optimizer.zero_grad()
        loss = self.model(images, boxes).mean()
        loss.backward()
        self.optimizer.step()
        return loss
