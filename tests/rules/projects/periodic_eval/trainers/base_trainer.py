"""A base trainer: the subclass says what one batch does; validation runs every `validate_every`
steps and once after training, test metrics after every epoch."""
import torch


class BaseTrainer:
    def __init__(self, model, optimizer, train_loader, val_loader, test_loader, validate_every=500):
        self.device = torch.device("cuda")
        self.model = model.to(self.device)
        self.optimizer = optimizer
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.test_loader = test_loader
        self.validate_every = validate_every
        self.step = 0

    def train_on_batch(self, batch):
        raise NotImplementedError

    def validate_on_batch(self, batch):
        raise NotImplementedError

    def test_on_batch(self, batch):
        raise NotImplementedError

    def train(self, epochs):
        for epoch in range(epochs):
            self.model.train()
            for batch in self.train_loader:
                self.train_on_batch(batch)
                self.step += 1
                if self.step % self.validate_every == 0:
                    self.validate()
            self.test()
        self.validate()

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        for batch in self.val_loader:
            self.validate_on_batch(batch)
        self.model.train()

    @torch.no_grad()
    def test(self):
        self.model.eval()
        for batch in self.test_loader:
            self.test_on_batch(batch)
        self.model.train()
