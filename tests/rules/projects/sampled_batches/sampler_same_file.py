import random

import numpy as np
import torch


class EdgeSampler:
    def __init__(self, edges):
        self.edges = edges

    def draw(self, n):
        picked = np.array(random.sample(self.edges, n))
        src = torch.from_numpy(picked[:, 0])
        dst = torch.from_numpy(picked[:, 1])
        return src, dst


def fit(model, edges, steps, device):
    sampler = EdgeSampler(edges)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        src, dst = sampler.draw(512)
        src, dst = src.to(device), dst.to(device)
        loss = model(src, dst)
        opt.zero_grad()
        loss.backward()
        opt.step()
