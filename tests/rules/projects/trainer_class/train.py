"""A GPT trainer laid out like nanoGPT/minGPT forks: a Trainer class with run_step(batch)."""
import torch

from data import TokenLoader
from model import GPT, GPTConfig
from optim import build_optimizer


class Trainer:
    def __init__(self, config, model, train_loader):
        self.config = config
        self.device = "cuda"
        self.model = model.to(self.device)
        self.optimizer = build_optimizer(config, self.model)
        self.train_loader = train_loader
        self.data = iter(train_loader)

    def run_step(self, batch):
        x, y = batch
        x, y = x.to(self.device), y.to(self.device)
        logits, loss = self.model(x, y)
        self.model.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss

    def run(self):
        for it in range(self.config.max_iters):
            batch = next(self.data)
            self.run_step(batch)


if __name__ == "__main__":
    config = GPTConfig()
    Trainer(config, GPT(config), TokenLoader("data/train.bin", 12, 1024)).run()
