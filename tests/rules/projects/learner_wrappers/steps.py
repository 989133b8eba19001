"""Optimizer and step builders, configured by a dict: the step closes over a state dict."""
import torch
from torch import nn


class ScoreNet(nn.Module):
    def __init__(self, dim=512):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, x):
        return self.body(x)


def build_net(cfg):
    return ScoreNet(cfg["dim"]).to(cfg["device"])


def make_optimizer(cfg, params):
    return torch.optim.Adam(params, lr=cfg["lr"], fused=True)


def make_step_fn(noise_scale):
    def step_fn(state, batch):
        model, optimizer = state["model"], state["optimizer"]
        noise = torch.randn_like(batch) * noise_scale
        loss = (model(batch + noise) + noise / noise_scale).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()
    return step_fn
