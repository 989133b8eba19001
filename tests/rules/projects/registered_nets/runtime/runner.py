import torch

from .recipe import Recipe


class Runner:
    def __init__(self, recipe: Recipe, loader, device):
        self.recipe = recipe
        self.loader = loader
        self.device = device

    def setup(self):
        net = self.recipe.get_model()
        net.to(self.device)
        self.optimizer = self.recipe.get_optimizer()
        self.net = net

    def run_iter(self, noisy, clean):
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.l1_loss(self.net(noisy), clean)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()

    def fit(self, epochs):
        self.setup()
        for _ in range(epochs):
            for noisy, clean in self.loader:
                self.run_iter(noisy.to(self.device, non_blocking=True), clean.to(self.device, non_blocking=True))
