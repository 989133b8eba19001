"""An actor-critic agent: two networks, two optimizers, one update per environment step."""
import torch
from torch import nn


class AverageMeter:
    def __init__(self):
        self.total, self.count = 0.0, 0

    def update(self, value, n=1):
        self.total += value * n
        self.count += n


class ActorCritic:
    def __init__(self, obs_dim, act_dim, device):
        self.device = device
        self.actor = nn.Sequential(nn.Linear(obs_dim, 256), nn.ReLU(), nn.Linear(256, act_dim)).to(device)
        self.critic = nn.Sequential(nn.Linear(obs_dim + act_dim, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=3e-4, fused=True)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=3e-4, fused=True)

    def update(self, obs, act, ret):
        q = self.critic(torch.cat([obs, act], dim=-1)).squeeze(-1)
        critic_loss = (q - ret).pow(2).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        actor_loss = -self.critic(torch.cat([obs, self.actor(obs)], dim=-1)).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        return critic_loss.detach()
