"""An agent class of the project's own holds the networks; the loop only hands it transitions."""
import torch

from agents import ActorCritic, AverageMeter


def run(env, steps, device):
    agent = ActorCritic(env.obs_dim, env.act_dim, device)
    meter = AverageMeter()
    for step in range(steps):
        obs, act, ret = env.sample(device)
        loss = agent.update(obs, act, ret)
        meter.update(float(step))


if __name__ == "__main__":
    run(None, 1000, torch.device("cuda"))
