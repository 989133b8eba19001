"""A language-model trainer: counts masked tokens on the host batch, then moves it with the
project's helper (a blocking copy at the call); the eval batches go through the pinned helper."""
import torch

from common.tensors import move_pinned, move_to


class LMTrainer:
    def __init__(self, model, train_loader, eval_loader, device):
        self.model = model
        self.train_loader = train_loader
        self.eval_loader = eval_loader
        self.device = device
        self.optim = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)

    def train_step(self, batch):
        n_tokens = batch["attention_mask"].sum().item()
        batch = move_to(batch, self.device)
        out = self.model(input_ids=batch["input_ids"], labels=batch["labels"])
        self.optim.zero_grad()
        out.loss.backward()
        self.optim.step()
        return n_tokens

    @torch.no_grad()
    def evaluate(self):
        total = torch.zeros((), device=self.device)
        for batch in self.eval_loader:
            batch = move_pinned(batch, self.device)
            total += self.model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
        return total

    def fit(self, epochs):
        tokens = 0
        for _ in range(epochs):
            for batch in self.train_loader:
                tokens += self.train_step(batch)
        return tokens
