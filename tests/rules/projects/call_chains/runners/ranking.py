from .base import Runner
from .ranking_metrics import hit_rates


class RankingRunner(Runner):
    def __init__(self, model, val_loader, device, ks):
        super().__init__(model, val_loader, device)
        self.ks = ks

    def score_batch(self, batch):
        items, labels = batch
        return hit_rates(self.model(items), labels, self.ks)
