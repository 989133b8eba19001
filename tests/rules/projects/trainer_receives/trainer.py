import torch


class Trainer:
    """Runs the epochs: the caller builds the model, the optimizer and the loader."""

    def __init__(self, model, optimizer, loader, device, log_every=50):
        self.model = model.to(device)
        self.optimizer = optimizer
        self.loader = loader
        self.device = device
        self.log_every = log_every
        self.criterion = torch.nn.CrossEntropyLoss()

    def run_step(self, images, labels):
        images = images.to(self.device, non_blocking=True)
        labels = labels.to(self.device, non_blocking=True)
        loss = self.criterion(self.model(images), labels)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss

    def fit(self, epochs):
        self.model.train()
        for epoch in range(epochs):
            for step, (images, labels) in enumerate(self.loader):
                loss = self.run_step(images, labels)
                if step % self.log_every == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
