"""A generic trainer: the caller hands it the function that computes each batch's loss."""
import torch


class Trainer:
    def __init__(self, model, data_iter, optimizer, device):
        self.model, self.data_iter, self.optimizer, self.device = model, data_iter, optimizer, device

    def train(self, get_loss, epochs=1):
        self.model.train()
        for epoch in range(epochs):
            for step, batch in enumerate(self.data_iter):
                batch = [t.to(self.device, non_blocking=True) for t in batch]
                self.optimizer.zero_grad()
                loss = get_loss(self.model, batch, step).mean()
                loss.backward()
                self.optimizer.step()
