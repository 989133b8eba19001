"""An RL agent (an nn.Module of the entry) builds the world model of models.py in its __init__
and runs its training step from its own method, called from the environment loop."""
import torch
from torch import nn

import models


class Agent(nn.Module):
    def __init__(self, config):
        super().__init__()
        self._wm = models.WorldModel(config.dim).to(config.device)
        self._step = 0

    def __call__(self, obs, training=True):
        if training:
            self._train(obs)
        self._step += 1

    def _train(self, obs):
        metrics = self._wm.train_step(obs)
        return metrics


def main(config, env):
    agent = Agent(config)
    obs = env.reset()
    for _ in range(config.steps):
        agent(obs)
        obs = env.step(None)


if __name__ == "__main__":
    main(None, None)
