import torch
import torch.nn.functional as F

from solvers.nets import ResidualNet


class PlainSolver:
    def __init__(self, opt):
        self.device = torch.device("cuda")
        self.net = ResidualNet().to(self.device)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=opt["lr"], fused=True)

    def feed(self, batch):
        self.low, self.high = (t.to(self.device, non_blocking=True) for t in batch)

    def update(self, step):
        self.optimizer.zero_grad()
        loss = F.l1_loss(self.net(self.low), self.high)
        loss.backward()
        self.optimizer.step()

    def save(self, step):
        torch.save(self.net.state_dict(), f"net_{step}.pth")
