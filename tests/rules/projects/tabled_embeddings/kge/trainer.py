import torch
from torch import nn


class EpochRunner:
    def __init__(self, model, optimizer, batch_size=1000):
        self.model = model
        self.optimizer = optimizer
        self.batch_size = batch_size
        self.loss = nn.CrossEntropyLoss()

    def epoch(self, examples):
        order = examples[torch.randperm(examples.shape[0], device=examples.device)]
        for start in range(0, order.shape[0], self.batch_size):
            batch = order[start:start + self.batch_size]
            scores = self.model(batch)
            loss = self.loss(scores, batch[:, 2])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
