import torch

from learning.learner import Learner
from replay import Replay


class Critic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 1)

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], -1))


def main():
    device = torch.device("cuda")
    policy = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).to(device)
    learner = Learner(policy, Critic().to(device), Replay(device))
    while learner.updates < 100_000:
        learner.update_critic()
        if learner.updates % 2 == 0:
            learner.update_policy()


if __name__ == "__main__":
    main()
