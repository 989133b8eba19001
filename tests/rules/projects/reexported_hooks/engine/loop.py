import torch


class Learner:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def compute_loss(self, batch):
        raise NotImplementedError

    def run(self, steps):
        it = iter(self.loader)
        for _ in range(steps):
            loss = self.compute_loss(next(it))
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
