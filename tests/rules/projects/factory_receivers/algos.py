import torch


class PPO:
    def __init__(self, policy, lr=3e-4):
        self.policy = policy
        self.opt = torch.optim.Adam(policy.parameters(), lr=lr)

    def update(self, batch):
        adv = torch.tensor(batch["adv"]).cuda()
        loss = -(self.policy(batch["obs"]) * adv).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()


class A2C:
    def __init__(self, policy, lr=7e-4):
        self.policy = policy
        self.opt = torch.optim.RMSprop(policy.parameters(), lr=lr)

    def update(self, batch, entropy_coef=0.01):
        ret = torch.tensor(batch["ret"]).cuda()
        loss = ((self.policy(batch["obs"]) - ret) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()


ALGOS = {"ppo": PPO, "a2c": A2C}


def build_algo(name, policy):
    return ALGOS[name](policy)
