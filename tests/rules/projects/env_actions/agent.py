import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Actor(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, 256), nn.ReLU(), nn.Linear(256, 2 * act_dim))

    def forward(self, obs):
        mu, log_std = self.body(obs).chunk(2, dim=-1)
        return torch.tanh(mu), log_std.clamp(-10, 2)


class SacAgent:
    def __init__(self, obs_dim: int, act_dim: int, device: torch.device):
        self.device = device
        self.actor = Actor(obs_dim, act_dim).to(device)
        self.critic = nn.Linear(obs_dim + act_dim, 1).to(device)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=3e-4)

    def select_action(self, obs):
        with torch.no_grad():
            obs = torch.as_tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0)
            mu, _ = self.actor(obs)
            return mu.cpu().data.numpy().flatten()

    def sample_action(self, obs):
        with torch.no_grad():
            obs = torch.as_tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0)
            mu, log_std = self.actor(obs)
            pi = mu + torch.randn_like(mu) * log_std.exp()
            action = pi.clamp(-1, 1).cpu().numpy()
            return action[0]

    def update(self, obs, act, ret):
        q = self.critic(torch.cat([obs, act], dim=-1)).squeeze(-1)
        critic_loss = F.mse_loss(q, ret)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        mu, _ = self.actor(obs)
        actor_loss = -self.critic(torch.cat([obs, mu], dim=-1)).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        return critic_loss.item()
