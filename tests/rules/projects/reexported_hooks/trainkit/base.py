import torch


class BaseTrainer:
    """A template-method trainer: the loop, the optimizer step and the loader are here; the
    subclass computes the loss (and runs its backward) in ``train_step``."""

    def __init__(self, net, dataset, lr=1e-3):
        self.net = net
        self.loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True,
                                                  persistent_workers=True)
        self.optim = torch.optim.Adam(net.parameters(), lr=lr, fused=True)

    def train_step(self, batch):
        raise NotImplementedError

    def log(self, stats):
        pass

    def fit(self, epochs, log_every=100):
        step = 0
        for _ in range(epochs):
            for batch in self.loader:
                stats = self.train_step(batch)
                self.optim.step()
                self.optim.zero_grad(set_to_none=True)
                if step % log_every == 0:
                    self.log(stats)
                step += 1
