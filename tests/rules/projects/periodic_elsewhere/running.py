"""Runners in the shape of a time-series project: the train epoch and the evaluation live here,
the epoch loop (and the validation interval) in main.py."""
import torch


def validate(val_evaluator, epoch):
    with torch.no_grad():
        metrics = val_evaluator.evaluate(epoch)
    return metrics


class Runner:
    def __init__(self, model, loader, optimizer, device):
        self.model, self.loader, self.optimizer, self.device = model, loader, optimizer, device

    def train_epoch(self, epoch):
        self.model.train()
        total = 0.0
        for x, y in self.loader:
            x, y = x.to(self.device), y.to(self.device)
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total

    def evaluate(self, epoch):
        self.model.eval()
        total, preds = 0.0, []
        for x, y in self.loader:
            x, y = x.to(self.device), y.to(self.device)
            out = self.model(x)
            loss = torch.nn.functional.mse_loss(out, y)
            total += torch.sum(loss).cpu().item()
            preds.append(out.cpu().numpy())
        return total, preds
