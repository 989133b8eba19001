import torch
import torch.nn.functional as F

from solvers.nets import PatchCritic
from solvers.plain import PlainSolver


class AdversarialSolver(PlainSolver):
    def __init__(self, opt):
        super().__init__(opt)
        self.critic = PatchCritic().to(self.device)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=opt["lr"], fused=True)

    def update(self, step):
        fake = self.net(self.low)
        self.critic_optimizer.zero_grad()
        critic_loss = F.softplus(self.critic(fake.detach())).mean() + F.softplus(-self.critic(self.high)).mean()
        critic_loss.backward()
        self.critic_optimizer.step()
        self.optimizer.zero_grad()
        loss = F.l1_loss(fake, self.high) + 0.01 * F.softplus(-self.critic(fake)).mean()
        loss.backward()
        self.optimizer.step()
