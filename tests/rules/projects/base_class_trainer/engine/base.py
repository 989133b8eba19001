import torch


class BaseRunner:
    def __init__(self, cfg, net, loss_fn):
        self.cfg = cfg
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.backends.cudnn.benchmark = True
        self.net = net.to(self.device)
        self.loss_fn = loss_fn
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=cfg["lr"], momentum=0.9)

    def run(self):
        for epoch in range(self.cfg["epochs"]):
            self.one_epoch(epoch)
            torch.save(self.net.state_dict(), f"epoch{epoch}.pt")

    def one_epoch(self, epoch):
        raise NotImplementedError
