import torch


class BaseRunner:
    def __init__(self, args, net, loader):
        self.net = net
        self.loader = loader
        self.optimizer = torch.optim.AdamW(self.net.parameters(), lr=args.lr, fused=True)

    def loss(self, x, y):
        raise NotImplementedError

    def fit(self, epochs):
        for _ in range(epochs):
            for x, y in self.loader:
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                self.optimizer.zero_grad()
                self.loss(x, y).backward()
                self.optimizer.step()
