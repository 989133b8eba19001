"""A multi-agent PPO learner: every minibatch field is converted by a helper of another module and
moved with the keywords the learner keeps (`**self.tpdv`)."""
import torch

from utils.convert import as_torch, flat


class PPOLearner:
    def __init__(self, policy, device=torch.device("cpu"), clip=0.2):
        self.policy = policy
        self.clip = clip
        self.tpdv = dict(dtype=torch.float32, device=device)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=5e-4, fused=True)

    def update(self, sample):
        obs, actions, old_logp, returns, adv = sample
        old_logp = as_torch(old_logp).to(**self.tpdv)
        returns = as_torch(returns).to(**self.tpdv)
        adv = as_torch(adv).to(**self.tpdv)
        logp, values = self.policy.evaluate(flat(obs), actions)
        ratio = torch.exp(logp - old_logp)
        clipped = torch.clamp(ratio, 1 - self.clip, 1 + self.clip)
        loss = -torch.min(ratio * adv, clipped * adv).mean() + ((returns - values) ** 2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return ratio

    def train(self, buffer, epochs=15):
        info = {"ratio": 0.0}
        for _ in range(epochs):
            for sample in buffer.feed_forward_generator(4):
                ratio = self.update(sample)
                info["ratio"] += ratio.mean().item()
        return info
