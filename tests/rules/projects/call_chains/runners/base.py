"""A template-method runner: its validation loop hands each batch to a hook its subclasses define."""
import torch


class Runner:
    def __init__(self, model, val_loader, device):
        self.model, self.val_loader, self.device = model, val_loader, device

    def evaluate(self):
        self.model.eval()
        totals = {}
        with torch.no_grad():
            for batch in self.val_loader:
                batch = [t.to(self.device) for t in batch]
                for name, value in self.score_batch(batch).items():
                    totals[name] = totals.get(name, 0.0) + value
        self.model.train()
        return totals

    def score_batch(self, batch):
        raise NotImplementedError
