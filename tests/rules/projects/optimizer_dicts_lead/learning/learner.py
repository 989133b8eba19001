"""A learner holding its optimizers in a dict: each update method steps them in a loop (or one
entry of the dict), so one call is a whole training step; the loop that calls them is in main.py."""
import torch


class Learner:
    def __init__(self, policy, critic, replay, lr=3e-4):
        self.policy, self.critic, self.replay = policy, critic, replay
        self.optimizers = {"policy": torch.optim.Adam(policy.parameters(), lr=lr),
                           "critic": torch.optim.Adam(critic.parameters(), lr=lr)}
        self.updates = 0
        self.log = {"policy": [], "critic": []}

    def _apply(self, loss, names):
        chosen = [self.optimizers[n] for n in names]
        for optimizer in chosen:
            optimizer.zero_grad()
        loss.backward()
        for optimizer in chosen:
            optimizer.step()

    def update_policy(self):
        obs = self.replay.sample(256)
        loss = -self.critic(obs, self.policy(obs)).mean()
        self.log["policy"].append(loss.item())
        self._apply(loss, ["policy"])

    def update_critic(self):
        obs, target = self.replay.sample_with_targets(256)
        loss = torch.nn.functional.mse_loss(self.critic(obs, self.policy(obs).detach()), target)
        self.optimizers["critic"].zero_grad()
        loss.backward()
        self.optimizers["critic"].step()
        self.log["critic"].append(float(loss))
        self.updates += 1
