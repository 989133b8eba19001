"""A re-ID style engine: the base class owns the epoch and batch loops, a subclass says what one
batch does (``forward_backward``). The loader comes from a data manager: nothing here says it is a
DataLoader, and the base class's batch loop runs no backward itself."""
import torch


class Engine:
    def __init__(self, datamanager, use_gpu=True):
        self.datamanager = datamanager
        self.train_loader = datamanager.train_loader
        self.test_loader = datamanager.test_loader
        self.use_gpu = use_gpu and torch.cuda.is_available()
        self.names = []

    def run(self, max_epoch, eval_freq=10):
        for self.epoch in range(max_epoch):
            self.train()
            if (self.epoch + 1) % eval_freq == 0:
                self.test()
        self.export_all()

    def train(self):
        losses = {}
        for self.batch_idx, data in enumerate(self.train_loader):
            loss_summary = self.forward_backward(data)
            for name, value in loss_summary.items():
                losses.setdefault(name, []).append(value)

    def forward_backward(self, data):
        raise NotImplementedError

    def model_backward_and_update(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def export_all(self):
        for name in self.names:
            self.export(name)

    def export(self, name):
        pass

    @torch.no_grad()
    def test(self):
        for data in self.test_loader:
            self.evaluate_batch(data)

    def evaluate_batch(self, data):
        raise NotImplementedError
