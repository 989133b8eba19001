import torch

from trainers.base_trainer import BaseTrainer


class Trainer(BaseTrainer):
    def __init__(self, rank, config, only_validation, model, loss_function, optimizer, train_loader, valid_loader):
        super().__init__(rank, config, only_validation, model, optimizer)
        self.loss_function = loss_function
        self.train_dataloader = train_loader
        self.valid_dataloader = valid_loader

    def _train_epoch(self, epoch):
        for noisy, clean in self.train_dataloader:
            self.optimizer.zero_grad()
            noisy = noisy.to(self.rank, non_blocking=True)
            clean = clean.to(self.rank, non_blocking=True)
            loss = self.loss_function(self.model(noisy), clean)
            loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def _validation_epoch(self, epoch):
        scores = []
        for i, (noisy, clean) in enumerate(self.valid_dataloader):
            noisy = noisy.to(self.rank, non_blocking=True)
            enhanced = self.model(noisy)
            noisy = noisy.squeeze(0).cpu().numpy()
            enhanced = enhanced.squeeze(0).cpu().numpy()
            scores.append(float(((noisy - enhanced) ** 2).mean()))
        return sum(scores) / len(scores)
