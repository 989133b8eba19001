"""An actor-critic update that the training script hands its policy to."""
import torch
from torch import nn, optim


class Policy(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=256):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.actor = nn.Linear(hidden, n_actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.actor(h), self.critic(h)


class ActorCriticUpdate:
    def __init__(self, policy, lr=7e-4, value_coef=0.5, max_grad_norm=0.5):
        self.policy = policy
        self.value_coef = value_coef
        self.max_grad_norm = max_grad_norm
        self.optimizer = optim.Adam(policy.parameters(), lr=lr, eps=1e-5, fused=True)

    def update(self, obs, actions, returns, epochs=4, minibatches=8):
        for _ in range(epochs):
            for idx in torch.randperm(obs.shape[0], device=obs.device).chunk(minibatches):
                logits, values = self.policy(obs[idx])
                log_probs = torch.log_softmax(logits, dim=-1).gather(1, actions[idx].unsqueeze(1)).squeeze(1)
                advantages = returns[idx] - values.squeeze(1)
                loss = -(log_probs * advantages.detach()).mean() + self.value_coef * advantages.pow(2).mean()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.optimizer.step()
